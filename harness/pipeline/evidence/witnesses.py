"""The launch's two witnesses: the launcher process once it runs the docker CLI, and the
container once it started. The launcher's must confirm the exec of exactly the recorded
argv (`judge.witnessed`): a launch it cannot vouch for is refused."""

from __future__ import annotations

from collections.abc import Callable

from harness.base.catalogue import WITNESS_EXEC_UNCONFIRMED
from harness.judge import witnessed
from harness.measure.runfolder import layout
from harness.measure.witness import container, launcher
from harness.pipeline.evidence.source import LAUNCHED, STARTED, Evidence, Gathered, Scene


def _failed(name: str) -> Callable[[str], dict]:
    return lambda why: {"schema": f"harness.measure.witness.{name}/v1", "error": why}


def _launcher(scene: Scene) -> Gathered:
    sub = scene.subject
    if sub is None:
        raise ValueError("the launcher witness needs the launcher's pid")
    doc = launcher.collect(sub.launcher_pid, sub.program)
    return Gathered(doc, tuple(witnessed.judge(doc, list(sub.argv))))


def _container(scene: Scene) -> Gathered:
    sub = scene.subject
    if sub is None or sub.container_id is None:
        raise ValueError("the container witness needs a container id")
    return Gathered(container.collect(sub.container_id, set(sub.secret_names)))


LAUNCHER = Evidence("launcher", LAUNCHED, layout.LAUNCHER_WITNESS, _launcher,
                    required=lambda _control: True, rule=WITNESS_EXEC_UNCONFIRMED,
                    failed=_failed("launcher"))
CONTAINER = Evidence("container", STARTED, layout.CONTAINER_INSPECT, _container,
                     failed=_failed("container"))

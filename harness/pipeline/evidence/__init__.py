"""Evidence gathered around a run: one shape (`source.Evidence`), one registry, one runner.
To add a source: one module here with `collect(scene) -> Gathered` (measure in `measure/`,
decide in `judge/`), declared as `Evidence(...)` and added to SOURCES in phase order."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from harness.base.atomic import write_json
from harness.base.reason import Reason
from harness.pipeline.evidence import (
    gpuidle,
    hostsnapshot,
    kernelwindow,
    logfigures,
    mountfacts,
    sampled,
    slurmclaim,
    witnesses,
)
from harness.pipeline.evidence.source import DURING, EXITED, Evidence, Gathered, Scene

SOURCES: tuple[Evidence, ...] = (
    mountfacts.MOUNTS, hostsnapshot.BEFORE,  # preflight: mounts first (refusals before)
    slurmclaim.CLAIM,  # locked: a Slurm night's claim, before any other evidence
    kernelwindow.MARK, gpuidle.ORPHANS,  # locked: the window starts with the lock
    gpuidle.BEFORE,  # locked: the GPU idle before launch (may refuse)
    witnesses.LAUNCHER, witnesses.CONTAINER, sampled.SAMPLER,
    gpuidle.AFTER,  # exited: nothing of the run's own left on the GPU
    logfigures.METRICS, sampled.TELEMETRY, kernelwindow.WINDOW, hostsnapshot.AFTER,
)


def gather(phase: str, scene: Scene, sources: tuple[Evidence, ...] = SOURCES
           ) -> dict[str, Gathered]:
    """Every source of `phase`, in order, each seeing what those before it gathered; at
    EXITED each running DURING source is ended first."""
    found: dict[str, Gathered] = {}
    for source in sources:
        held = scene.gathered.get(source.name, Gathered()).held
        if source.phase == phase:
            collect = source.collect
        elif phase == EXITED and source.phase == DURING and callable(held):
            collect = lambda _scene, end=held: end()  # noqa: E731
        else:
            continue
        found[source.name] = _one(source, collect, replace(
            scene, gathered={**scene.gathered, **found}))
    return found


def _one(source: Evidence, collect: Any, scene: Scene) -> Gathered:
    """One source gathered and written. Any failure is decided here alike: its `failed`
    document, and its `rule` only where the control requires that evidence."""
    try:
        got = collect(scene)
        _write(source, got, scene)
        return got
    except Exception as e:  # the seal matters more than this evidence; never a pass
        why = f"{type(e).__name__}: {e}"[:500]
        scene.ctx.ui.event("evidence-failed", source=source.name, error=why)
        required = source.required(scene.ctx.control)
        got = Gathered(source.failed(why), (Reason(source.rule, "; ".join(
            filter(None, (f"{source.name}: {why}", source.hint)))),) if required else ())
        with contextlib.suppress(Exception):  # said above; the block still holds it
            _write(source, got, scene)
        return got


def _write(source: Evidence, got: Gathered, scene: Scene) -> None:
    running = source.phase == DURING and callable(got.held)  # written when it ends
    if source.file and "#" not in source.file and got.doc is not None and not running:
        write_json(scene.ctx.run_dir / source.file, got.doc, exclusive=True)


def blocks(doc: str, gathered: Mapping[str, Gathered],
           sources: tuple[Evidence, ...] = SOURCES) -> dict[str, Any]:
    """The blocks of `doc` that sources fill, by key; None where not gathered."""
    out: dict[str, Any] = {}
    for s in sources:
        where, _, key = (s.file or "").partition("#")
        if key and where == doc:
            out[key] = gathered[s.name].doc if s.name in gathered else None
    return out


def reasons(gathered: Mapping[str, Gathered]) -> tuple[Reason, ...]:
    return tuple(r for g in gathered.values() for r in g.reasons)

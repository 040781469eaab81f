"""The GPU idle and clean: under the lock before launch, exited containers of dead
harnesses are removed (and recorded) first; then a foreign holder, a container still
running beside this run, or VRAM in use over the bound refuse, or are waited out up to
the control's `idle_gpu.wait_s`; and after the container exited, nothing of the run's own
may be left. The look and the wait are `harness.probe.idlewait.check`'s."""

from __future__ import annotations

from collections.abc import Callable

from harness.base.catalogue import ENV_ERROR
from harness.measure.runfolder import layout
from harness.pipeline import orphans
from harness.pipeline.evidence.source import EXITED, LOCKED, Evidence, Gathered, Scene
from harness.probe import idlewait


def _orphans(scene: Scene) -> Gathered:
    ctx = scene.ctx
    removed = orphans.reap(ctx.loaded.lock_path, ctx.control.device)
    for rec in removed:
        ctx.ui.event("orphan-removed", id=rec["id"], run_id=rec.get("run_id"),
                     removed=rec.get("removed", False), exit_code=rec.get("exit_code"))
    return Gathered({"schema": "harness.orphans-removed/v1", "containers": removed}
                    if removed else None)


def _collect(phase: str) -> Callable[[Scene], Gathered]:
    def collect(scene: Scene) -> Gathered:
        ctx = scene.ctx
        container = scene.subject.container_id if scene.subject is not None else None
        doc, reasons = idlewait.check(ctx.control, phase=phase, run_id=str(ctx.run_id),
                                     lock=str(ctx.loaded.lock_path), container=container)
        return Gathered(doc, tuple(reasons))
    return collect


ORPHANS = Evidence("orphans", LOCKED, layout.ORPHANS_REMOVED, _orphans,
                   required=lambda _control: True, rule=ENV_ERROR)
# A look that could not be taken (no engine on the cpu profile) is a note in its file:
# what refuses is what a look found, never the want of one.
BEFORE = Evidence("idle-gpu", LOCKED, "idle-gpu.json", _collect("locked"))
AFTER = Evidence("idle-gpu-after", EXITED, "idle-gpu-after.json", _collect("exited"))

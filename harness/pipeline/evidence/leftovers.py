"""Under the lock, before the launch: exited containers of dead harnesses are removed (and
recorded). A harness container still running beside this run is the idle-GPU source's
refusal (`evidence.gpuidle`), which runs next."""

from __future__ import annotations

from harness.base.catalogue import ENV_ERROR
from harness.measure.runfolder import layout
from harness.pipeline import orphans
from harness.pipeline.evidence.source import LOCKED, Evidence, Gathered, Scene


def _orphans(scene: Scene) -> Gathered:
    ctx = scene.ctx
    removed = orphans.reap(ctx.loaded.lock_path, ctx.control.device)
    for rec in removed:
        ctx.ui.event("orphan-removed", id=rec["id"], run_id=rec.get("run_id"),
                     removed=rec.get("removed", False), exit_code=rec.get("exit_code"))
    return Gathered({"schema": "harness.orphans-removed/v1", "containers": removed}
                    if removed else None)


ORPHANS = Evidence("orphans", LOCKED, layout.ORPHANS_REMOVED, _orphans,
                   required=lambda _control: True, rule=ENV_ERROR)

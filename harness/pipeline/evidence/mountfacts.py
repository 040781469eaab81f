"""What each mount outside the source seal held before the launch
(`measure.mountdigest`): never a refusal, a fact `harness diff` compares."""

from __future__ import annotations

import os

from harness.measure import mountdigest
from harness.measure.runfolder import layout
from harness.pipeline.evidence.source import PREFLIGHT, Evidence, Gathered, Scene


def _digests(scene: Scene) -> Gathered:
    ctx = scene.ctx
    found = mountdigest.digest_mounts(ctx.control, ctx.control_file, ctx.loaded.may_mount,
                                      mountdigest.cache_path(os.environ))
    return Gathered([m.record() for m in found])


MOUNTS = Evidence("mounts", PREFLIGHT, f"{layout.PREFLIGHT}#mounts", _digests,
                  failed=lambda _why: None)  # not taken, as for a run cut short

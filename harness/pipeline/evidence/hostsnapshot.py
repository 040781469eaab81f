"""The host's identity before the run and after it (`measure.host.identity`): every field
that changed in between refuses the run (HOST-DRIFT). The snapshot before is taken only
for a run preflight lets go, and may be the one the run before took a few ms ago
(`pipeline.results.Carried`)."""

from __future__ import annotations

from harness.base.catalogue import ENV_ERROR, HOST_DRIFT
from harness.base.reason import Reason
from harness.measure import engine
from harness.measure.host import identity
from harness.measure.runfolder import layout
from harness.pipeline.evidence.source import PREFLIGHT, SEAL, Evidence, Gathered, Scene


def _before(scene: Scene) -> Gathered:
    ctx = scene.ctx
    if ctx.preflight.reasons:
        return Gathered()
    carried = ctx.carried
    if carried is not None and carried.host is not None and carried.usable(ctx.loaded.files()):
        return Gathered(carried.host)
    return Gathered(identity.snapshot(docker_client=engine.client()))


def _after(scene: Scene) -> Gathered:
    before = scene.gathered.get("host-before")
    if before is None or not isinstance(before.doc, dict) or scene.ctx.outcome is None:
        return Gathered()
    host = identity.snapshot(docker_client=engine.client())
    return Gathered(host, tuple(Reason(HOST_DRIFT, c) for c in identity.drift(before.doc, host)))


BEFORE = Evidence("host-before", PREFLIGHT, layout.HOST_BEFORE, _before,
                  required=lambda _control: True, rule=ENV_ERROR)
AFTER = Evidence("host-after", SEAL, layout.HOST_AFTER, _after,
                 required=lambda _control: True, rule=ENV_ERROR)

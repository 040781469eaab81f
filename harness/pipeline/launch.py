"""Stages 2-4: take the GPU lock, refuse beside an orphan, build the vector, run it.

The lock is held from just before the orphan check to just after the container exits;
post-steps and sealing happen after release so the next control can start.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness import engine, execute, faultpoint, vector
from harness.atomic import write_json
from harness.config.loader import resolve
from harness.lock import GpuLock
from harness.pipeline.context import RunContext
from harness.verdict import Reason

INSTRUMENT_DIR = Path(__file__).resolve().parent.parent / "instrument"


def orphans(lock_path: Path, device: str) -> list[dict]:
    """Running containers a harness launched under this lock (or any rocm one for rocm)."""
    api = engine.client().api
    found = {}
    filters = [{"label": f"{vector.LABEL_PREFIX}.lock={lock_path}"}]
    if device == "rocm":
        filters.append({"label": f"{vector.LABEL_PREFIX}.device=rocm"})
    for f in filters:
        for c in api.containers(filters={**f, "status": "running"}):
            run_id = (c.get("Labels") or {}).get(f"{vector.LABEL_PREFIX}.run-id")
            found[c["Id"]] = {"id": c["Id"], "names": c.get("Names"), "run_id": run_id}
    return list(found.values())


def build_vector(ctx: RunContext) -> vector.Vector:
    ctl = ctx.control
    inp = vector.VectorInput(
        control=ctl, image_id=ctx.image_id or "", run_id=ctx.run_id,
        campaign=ctx.loaded.campaign.name, lock_path=ctx.loaded.lock_path,
        cidfile=ctx.run_dir / "container.cid",
        observations_dir=ctx.run_dir / "observations", instrument_dir=INSTRUMENT_DIR,
        mount_sources=tuple(resolve(m.source, ctx.control_file.parent) for m in ctl.mounts),
        model_source=ctx.model_source,
        extra_env={"HARNESS_SEAL": ctx.seal.digest if ctx.seal else ""},
    )
    return vector.build(inp, dict(os.environ))


def run(ctx: RunContext, lock: GpuLock) -> None:
    """Hold the lock around the container; record the interval even if interrupted."""
    ctx.held = lock.acquire()
    ctx.ui.event("lock-acquired", lock=str(lock.path), wait_s=round(ctx.held.wait_s, 3))
    try:
        faultpoint.reach("lock-held")
        found = orphans(lock.path, ctx.control.device)
        if found:
            ids = ", ".join(f"{o['id'][:12]} (run {o['run_id']})" for o in found)
            ctx.preflight.append(Reason("ENV-ORPHAN-CONTAINER",
                                        f"a harness container is still running: {ids}"))
            return
        vec = build_vector(ctx)
        obs = ctx.run_dir / "observations"
        obs.mkdir()
        obs.chmod(0o777)  # the container may run as a non-root user
        write_json(ctx.run_dir / "docker-vector.json", vec.evidence())
        ctx.ui.event("launch", run_id=ctx.run_id, image=ctx.image_id)
        out = execute.run(vec, ctx.run_dir, timeout=ctx.control.timeout,
                          grace=ctx.control.stop_grace,
                          on_started=lambda cid: ctx.ui.event("container", id=cid[:12]))
        ctx.outcome = out.as_dict()
    finally:
        lock.release()
        ctx.ui.event("lock-released", hold_s=ctx.held.hold_s)
    write_json(ctx.run_dir / "outcome.json", ctx.outcome)

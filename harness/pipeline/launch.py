"""Stages 2-4: take the GPU lock, clear or refuse orphans, judge the mounts, build, run.

The lock is held from just before the orphan check to just after the container exits;
post-steps and sealing happen after release so the next control can start.

Mount sources are judged here again, under the lock, where they lead now, by the one mount
policy (`harness.config.mountable`: roots, system paths, what the harness trusts): a
previous control with a read-write mount can plant a symlink on a declared path, so every
source is resolved now and docker is given the resolved path: the folder checked is the
folder mounted. No other harness container runs meanwhile (the orphan check), so nothing
of a workload's can swap a folder between this check and docker's mount.

After the container exits, still under the lock, `sanitize.sanitize` walks every
read-write mount and undoes setuid/setgid bits and device nodes the workload planted.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from harness.base import faultpoint
from harness.base.atomic import write_json
from harness.base.catalogue import ENV_ORPHAN_CONTAINER, MODEL_PATH_CHANGED
from harness.base.reason import Reason
from harness.config import mountable
from harness.config.loader import resolve
from harness.config.mountable import MountSource
from harness.instrument.harness_observer import interface
from harness.judge import witnessed
from harness.measure import execute, kmsg, vector
from harness.measure.lock import GpuLock
from harness.measure.runfolder import layout
from harness.measure.slurm import identity as slurm_identity
from harness.measure.telemetry import plan as telemetry_plan
from harness.pipeline import orphans, sanitize
from harness.pipeline.context import RunContext
from harness.pipeline.results import Launch
from harness.pipeline.stage import Keep

INSTRUMENT_DIR = Path(__file__).resolve().parent.parent / "instrument"


def trusted_paths(ctx: RunContext) -> list[Path]:
    """What no read-write mount of this run may reach (`mountable.protected_paths`)."""
    ld = ctx.loaded
    return mountable.protected_paths(runs_dir=ctx.run_dir.parent, lock=ld.lock_path,
                                     project=ld.project_dir, inputs=ld.next_run_inputs())


def model_moved(model: MountSource | None, hashed: Path | None) -> list[Reason]:
    """Pure: the model folder leads elsewhere now than when preflight hashed it."""
    if model is None or hashed is None or model.real == hashed:
        return []
    return [Reason(MODEL_PATH_CHANGED, f"model: {model.declared} resolved to {hashed} when "
                   f"it was hashed and to {model.real} at launch")]


def resolve_sources(ctx: RunContext) -> tuple[list[MountSource], MountSource | None,
                                              list[Reason]]:
    """Where every mount source and the model folder lead now, and each that may not go."""
    roots, protected = ctx.loaded.mount_roots(), trusted_paths(ctx)
    system = mountable.system_paths(os.environ)
    mounts = [mountable.locate(f"mounts[{i}]", resolve(m.source, ctx.control_file.parent),
                               m.read_only) for i, m in enumerate(ctx.control.mounts)]
    reasons = [r for s in mounts for r in mountable.judge(s, roots, protected, system)]
    model = None
    if ctx.control.model is not None and ctx.model_declared is not None:
        model = mountable.locate("model", ctx.model_declared, True)
        reasons += mountable.judge(model, roots, protected, system)
        reasons += model_moved(model, ctx.preflight.model_real)
    return mounts, model, reasons


def build_vector(ctx: RunContext, mounts: list[MountSource],
                 model: MountSource | None) -> vector.Vector:
    ctl, pre = ctx.control, ctx.preflight
    inp = vector.VectorInput(
        control=ctl, image_id=pre.image_id or "", run_id=ctx.run_id,
        campaign=ctx.loaded.campaign.name, lock_path=ctx.loaded.lock_path,
        cidfile=ctx.run_dir / layout.CONTAINER_CID,
        observations_dir=ctx.run_dir / interface.OBSERVATIONS_DIR, instrument_dir=INSTRUMENT_DIR,
        mount_sources=tuple(s.real for s in mounts),
        declared_sources=tuple(str(s.declared) for s in mounts),
        model_source=model.real if model else None,
        model_declared=str(model.declared) if model else None,
        extra_env={interface.ENV_SEAL: pre.seal.digest if pre.seal else ""},
        launcher=orphans.launcher_identity(),
        slurm_job=slurm_identity.job_id(os.environ),
        render_nodes=pre.render_nodes,
    )
    return vector.build(inp, dict(os.environ))


def clear_orphans(ctx: RunContext, lock: GpuLock) -> list[Reason]:
    """Remove exited containers of dead harnesses; refuse beside a running one."""
    removed = orphans.reap(lock.path, ctx.control.device)
    if removed:
        write_json(ctx.run_dir / layout.ORPHANS_REMOVED,
                   {"schema": "harness.orphans-removed/v1", "containers": removed})
        for rec in removed:
            ctx.ui.event("orphan-removed", id=rec["id"], run_id=rec.get("run_id"),
                         removed=rec.get("removed", False), exit_code=rec.get("exit_code"))
    found = orphans.running(lock.path, ctx.control.device)
    if found:
        ids = ", ".join(f"{o['id']} (run {o['run_id']})" for o in found)
        return [Reason(ENV_ORPHAN_CONTAINER, f"a harness container is still running: {ids}")]
    return []


def after_container(ctx: RunContext, mounts: list[MountSource]) -> list[Reason]:
    """Undo setuid/setgid bits and device nodes the workload left in its read-write
    mounts (`sanitize`); each refuses the run. Never raises an ordinary exception: what
    could not be checked refuses the run too."""
    rw = [(s.what, s.real) for s in mounts if not s.read_only]
    if not rw:
        return []
    try:
        reasons = sanitize.sanitize(ctx.run_dir, rw)
    except Exception as e:  # the lock must still be released; the run is refused
        reasons = [Reason(sanitize.RULE_INCOMPLETE, "the read-write mounts could not be "
                          f"checked for setuid files and device nodes: "
                          f"{type(e).__name__}: {e}"[:500])]
    if reasons:  # judged with the run's outcome, which they do not hide
        ctx.ui.event("mounts-sanitized", reasons=[str(r) for r in reasons])
    return reasons


def _interrupted(ctx: RunContext, signal: str, cid: str | None) -> None:
    """Say at once what a stop signal starts: the container's stop can take its grace."""
    what = (f"container {cid[:12]} (up to {ctx.control.stop_grace:g} s)" if cid
            else "the launch")
    ctx.ui.event("interrupted", signal=signal, run_id=ctx.run_id,
                 doing=f"stopping {what}, then sealing run {ctx.run_id} as interrupted",
                 again="press Ctrl-C again to kill it at once" if signal == "SIGINT" else None)


def _checked(ctx: RunContext, lock: GpuLock) -> tuple[list[MountSource], MountSource | None,
                                                       list[Reason]]:
    """Under the lock, before anything is launched: no orphan beside it, every mount
    allowed where it leads now."""
    refused = clear_orphans(ctx, lock)
    if refused:
        return [], None, refused
    mounts, model, refused = resolve_sources(ctx)
    if refused:
        ctx.ui.event("mounts-refused", reasons=[str(r) for r in refused])
    return mounts, model, refused


def sampling(ctx: RunContext) -> telemetry_plan.Plan:
    """What the control's telemetry samples while its container runs."""
    ctl = ctx.control
    return telemetry_plan.Plan(ctl.telemetry.interval, ctl.device,
                               telemetry_plan.gpu_indices(ctl.gpus))


def _prepared(ctx: RunContext, mounts: list[MountSource],
              model: MountSource | None) -> vector.Vector:
    """The docker vector, recorded, and the observations folder it mounts."""
    vec = build_vector(ctx, mounts, model)
    obs = ctx.run_dir / interface.OBSERVATIONS_DIR
    obs.mkdir()
    obs.chmod(0o777)  # the container may run as a non-root user
    write_json(ctx.run_dir / layout.VECTOR, vec.evidence())
    ctx.ui.event("launch", run_id=ctx.run_id, image=ctx.preflight.image_id)
    return vec


def run(ctx: RunContext, keep: Keep[Launch]) -> Launch:
    """Hold the lock around the container; record the interval even if interrupted.
    Returns the lock's hold, the outcome, and the reasons that refused the launch or that
    the container's exit left."""
    lock = ctx.lock
    if lock is None:
        raise ValueError("the launch stage needs the run's GPU lock")
    found = keep(Launch(held=lock.acquire()))
    found = keep(replace(found, kernel=kmsg.mark()))  # the window starts with the lock
    ctx.ui.event("lock-acquired", lock=str(lock.path), wait_s=round(found.held.wait_s, 3))
    launched: list[MountSource] = []
    try:
        faultpoint.reach("lock-held")
        mounts, model, refused = _checked(ctx, lock)
        if refused:
            found = keep(replace(found, reasons=tuple(refused)))
        else:
            vec = _prepared(ctx, mounts, model)
            launched = mounts
            out = execute.run(vec, ctx.run_dir, timeout=ctx.control.timeout,
                              grace=ctx.control.stop_grace,
                              on_started=lambda cid: ctx.ui.event("container", id=cid),
                              on_interrupt=lambda sig, cid: _interrupted(ctx, sig, cid),
                              telemetry=sampling(ctx))
            found = keep(replace(found, outcome=out.as_dict(),
                                 reasons=(*found.reasons,
                                          *witnessed.judge(out.launcher, list(vec.argv)))))
    finally:
        try:  # the container has exited (or stopped)
            planted = after_container(ctx, launched)
            found = keep(replace(found, reasons=(*found.reasons, *planted)))
        finally:
            lock.release()
            ctx.ui.event("lock-released", hold_s=found.held.hold_s)
    if found.outcome is not None:
        write_json(ctx.run_dir / layout.OUTCOME, found.outcome)
    return found

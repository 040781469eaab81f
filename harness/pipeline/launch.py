"""Under the GPU lock: gather the locked evidence, judge the mounts, run the container,
gather the evidence around it (`pipeline.evidence`), sanitize the read-write mounts.

A reason the locked evidence returns stops the run before anything is launched. Mount
sources are judged again here (`config.mountable`) where they lead now, and docker gets
the resolved path: an earlier read-write mount may have planted a symlink, and with no
other harness container running (the idle-GPU source) nothing can swap a folder between
this check and docker's mount. Post-steps and the seal run after release."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from harness.base import faultpoint
from harness.base.atomic import write_json
from harness.base.catalogue import MODEL_PATH_CHANGED, MOUNT_SANITIZE_INCOMPLETE
from harness.base.reason import Reason
from harness.config import mountable
from harness.config.loader import resolve
from harness.config.mountable import MountSource
from harness.instrument.harness_observer import interface
from harness.measure import execute, vector
from harness.measure.runfolder import layout
from harness.measure.slurm import identity as slurm_identity
from harness.measure.witness.subject import Subject
from harness.pipeline import evidence, orphans, sanitize
from harness.pipeline.context import RunContext
from harness.pipeline.evidence.source import LOCKED, Scene
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
        launcher=orphans.launcher_identity(), slurm_job=slurm_identity.job_id(os.environ),
        render_nodes=pre.render_nodes)
    return vector.build(inp, dict(os.environ))


def after_container(ctx: RunContext, mounts: list[MountSource]) -> list[Reason]:
    """Undo what the workload planted in its read-write mounts (`sanitize`), each a
    refusal; what could not be checked refuses too, never raises."""
    rw = [(s.what, s.real) for s in mounts if not s.read_only]
    if not rw:
        return []
    try:
        reasons = sanitize.sanitize(ctx.run_dir, rw)
    except Exception as e:  # the lock must still be released; the run is refused
        reasons = [Reason(MOUNT_SANITIZE_INCOMPLETE, "the read-write mounts could not be "
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
    """Hold the lock around the container, recording the interval even if interrupted;
    the reasons are those that refused the launch or that the container left."""
    lock = ctx.lock
    if lock is None:
        raise ValueError("the launch stage needs the run's GPU lock")
    found = keep(Launch(held=lock.acquire()))

    def gather(phase: str, subject: Subject | None = None) -> None:
        nonlocal found
        got = evidence.gather(phase, Scene(ctx, {**ctx.preflight.gathered, **found.gathered},
                                           subject))
        found = keep(replace(found, gathered={**found.gathered, **got},
                             reasons=found.reasons + evidence.reasons(got)))

    ctx.ui.event("lock-acquired", lock=str(lock.path), wait_s=round(found.held.wait_s, 3))
    launched: list[MountSource] = []
    try:
        gather(LOCKED)  # a Slurm night's claim first; the kernel log's window starts here
        faultpoint.reach("lock-held")
        mounts, model, refused = resolve_sources(ctx) if not found.reasons else ([], None, [])
        if refused:
            ctx.ui.event("mounts-refused", reasons=[str(r) for r in refused])
        found = keep(replace(found, reasons=found.reasons + tuple(refused)))
        if not found.reasons:
            vec = _prepared(ctx, mounts, model)
            launched = mounts
            out = execute.run(vec, ctx.run_dir, timeout=ctx.control.timeout,
                              grace=ctx.control.stop_grace,
                              on_started=lambda cid: ctx.ui.event("container", id=cid),
                              on_interrupt=lambda sig, cid: _interrupted(ctx, sig, cid),
                              at=gather)
            found = keep(replace(found, outcome={
                **out.as_dict(), **evidence.blocks(layout.OUTCOME, found.gathered)}))
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

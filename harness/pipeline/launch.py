"""Stages 2-4: take the GPU lock, clear or refuse orphans, resolve mounts, build, run.

The lock is held from just before the orphan check to just after the container exits;
post-steps and sealing happen after release so the next control can start.

Mount sources are resolved here, under the lock, and not only when the campaign was
loaded: a previous control with a read-write mount can plant a symlink on a declared path
(`data/later -> /outside`). Every source is resolved with realpath now, checked against the
mount roots now, and docker is given the resolved path, so the folder checked is the
folder mounted. No other harness container runs meanwhile (the orphan check), so nothing
of a workload's can swap a folder between this check and docker's mount. The mount roots
they are checked against were resolved once, when the campaign was loaded
(`Loaded.mount_roots`), so a root swapped for a symlink cannot widen them.

Two rules hold for every source, by construction, in `judge_source`:
- MOUNT-SYSTEM-PATH: no mount, even read-only, is `/`, or is, contains or lies inside a
  system path (`/proc`, `/sys`, `/dev`, `/run`, `/var/run`, `/boot`, `/etc`, the Docker
  socket and its folder); a read-only bind of a socket's folder still lets one connect.
- MOUNT-OVER-HARNESS: no read-write mount is, contains or lies inside anything the harness
  trusts (`protected_paths`): the runs folder, the lock, its code and Python, and every
  input of the next run (the campaign, each control, the controls folder, images.lock, the
  project's `.git`), nor the project's own code and inputs (`Makefile`, `pyproject.toml`,
  `campaigns/`, `controls/`, `images/`, `scripts/`, `tests/`, `benchmarks/`, `docs/`,
  `.ci/`, `harness/`, the default runs folder `gpu-runs/`, and every file git tracks), so a
  workload cannot rewrite what the harness, or the operator, runs next.

After the container exits, still under the lock, `sanitize.sanitize` walks every
read-write mount and undoes setuid/setgid bits and device nodes the workload planted.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.base import faultpoint
from harness.base.atomic import write_json
from harness.base.catalogue import (
    ENV_MOUNT_SOURCE,
    ENV_ORPHAN_CONTAINER,
    MODEL_PATH_CHANGED,
    MOUNT_OUTSIDE_ROOTS,
    MOUNT_OVER_HARNESS,
    MOUNT_SOURCE_KIND,
    MOUNT_SYSTEM_PATH,
)
from harness.base.reason import Reason
from harness.config.loader import resolve
from harness.config.mountable import overlaps, system_hit, system_paths, within
from harness.instrument.harness_observer import interface
from harness.measure import execute, vector
from harness.measure.lock import GpuLock
from harness.measure.runfolder import layout
from harness.measure.slurm import identity as slurm_identity
from harness.pipeline import orphans, sanitize, warm
from harness.pipeline.context import RunContext

INSTRUMENT_DIR = Path(__file__).resolve().parent.parent / "instrument"
HARNESS_DIR = INSTRUMENT_DIR.parent
# The project's code and inputs, relative to the project folder: what `make image`,
# `make`, the scripts and the tests run next, the other campaigns, and the sealed runs of
# other nights in the default runs folder.
PROJECT_CODE = ("Makefile", "pyproject.toml", "campaigns", "controls", "images", "scripts",
                "tests", "benchmarks", "docs", ".ci", ".git", "harness", "gpu-runs")
GIT_TIMEOUT_S = 10
MAX_GIT_FILES = 100_000


@dataclass(frozen=True)
class Source:
    """A mount source: where the control says, and where that leads now."""

    what: str  # e.g. "mounts[0]" or "model"
    declared: Path
    real: Path
    kind: str | None  # "dir", "file", another kind, or None when it cannot be reached
    read_only: bool


def judge_source(src: Source, roots: list[Path], protected: list[Path],
                 system: list[Path]) -> list[Reason]:
    """Pure: may `src` be mounted? `protected` are real paths no read-write mount may
    contain or lie inside (evidence, lock, code, the campaign's inputs); `system` are host
    paths no mount at all may be, contain or lie inside (`mountable.system_paths`)."""
    shown = f"{src.what}: {src.declared}" + (f" (resolves to {src.real})"
                                             if src.real != src.declared else "")
    if not within(src.real, roots):
        return [Reason(MOUNT_OUTSIDE_ROOTS, f"{shown} is outside the mount roots "
                       f"({', '.join(map(str, roots))}) at launch")]
    if (hit := system_hit(src.real, system)) is not None:
        return [Reason(MOUNT_SYSTEM_PATH, f"{shown} overlaps the system path {hit}; no "
                       "mount may be, contain or lie inside one, even read-only")]
    if src.kind is None:
        return [Reason(ENV_MOUNT_SOURCE, f"{shown} does not exist at launch")]
    if src.kind not in ("dir", "file"):
        return [Reason(MOUNT_SOURCE_KIND, f"{shown} is a {src.kind}, not a folder or a "
                       "regular file")]
    if not src.read_only:
        hit = [p for p in protected if overlaps(src.real, p)]
        if hit:
            return [Reason(MOUNT_OVER_HARNESS, f"{shown} is read-write and overlaps "
                           f"{hit[0]}, which the harness trusts (evidence, lock, code or "
                           "the campaign's inputs)")]
    return []


def _kind(path: Path) -> str | None:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "special file"


def _source(what: str, declared: Path, read_only: bool) -> Source:
    real = Path(os.path.realpath(declared))
    return Source(what, declared, real, _kind(real), read_only)


def _spots(path: Path) -> set[Path]:
    """Where `path` lives: the entry itself (its folder resolved, so a symlink there is
    covered too) and what it leads to."""
    p = Path(os.path.abspath(path))
    return {Path(os.path.realpath(p.parent)) / p.name, Path(os.path.realpath(p))}


def git_files(project: Path) -> list[Path]:
    """Every file git tracks in `project` (when it is a checkout), outside PROJECT_CODE;
    at most MAX_GIT_FILES, and none when git fails, is missing or takes too long."""
    if not os.path.lexists(project / ".git"):
        return []
    try:
        r = subprocess.run(["git", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
                            "-C", str(project), "ls-files", "-z"],
                           stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if r.returncode != 0:
        return []
    names = [os.fsdecode(n) for n in r.stdout.split(b"\0")[:MAX_GIT_FILES] if n]
    return [project / n for n in names if n.split("/", 1)[0] not in PROJECT_CODE]


def protected_paths(ctx: RunContext) -> list[Path]:
    """Real paths no read-write mount may be, contain or lie inside: the evidence, the
    lock, the harness's code and Python, every input the next run reads, and the
    project's own code and inputs (PROJECT_CODE, and every file git tracks)."""
    ld = ctx.loaded
    project = ld.project_dir
    trusted = [ctx.run_dir.parent, ld.lock_path, HARNESS_DIR, Path(sys.prefix),
               Path(sys.base_prefix), ld.campaign_file, ld.controls_dir, ctx.control_file,
               *(p for _, p in ld.controls.values()), *ld.files(),
               *(project / name for name in PROJECT_CODE), *git_files(project)]
    if ld.image_lock_file is not None:
        trusted.append(ld.image_lock_file)
    return sorted(set().union(*map(_spots, trusted)))


def resolve_sources(ctx: RunContext) -> tuple[list[Source], Source | None, list[Reason]]:
    """Resolve every mount source and the model folder now; name each that may not go."""
    roots, protected = ctx.loaded.mount_roots(), protected_paths(ctx)
    system = system_paths(os.environ)
    mounts = [_source(f"mounts[{i}]", resolve(m.source, ctx.control_file.parent), m.read_only)
              for i, m in enumerate(ctx.control.mounts)]
    reasons = [r for s in mounts for r in judge_source(s, roots, protected, system)]
    model = None
    if ctx.control.model is not None and ctx.model_declared is not None:
        model = _source("model", ctx.model_declared, True)
        reasons += judge_source(model, roots, protected, system)
        if ctx.model_real is not None and model.real != ctx.model_real:
            reasons.append(Reason(MODEL_PATH_CHANGED, f"model: {model.declared} resolved to "
                                  f"{ctx.model_real} when it was hashed and to {model.real} "
                                  "at launch"))
    return mounts, model, reasons


def build_vector(ctx: RunContext, mounts: list[Source], model: Source | None) -> vector.Vector:
    ctl = ctx.control
    inp = vector.VectorInput(
        control=ctl, image_id=ctx.image_id or "", run_id=ctx.run_id,
        campaign=ctx.loaded.campaign.name, lock_path=ctx.loaded.lock_path,
        cidfile=ctx.run_dir / layout.CONTAINER_CID,
        observations_dir=ctx.run_dir / interface.OBSERVATIONS_DIR, instrument_dir=INSTRUMENT_DIR,
        mount_sources=tuple(s.real for s in mounts),
        declared_sources=tuple(str(s.declared) for s in mounts),
        model_source=model.real if model else None,
        model_declared=str(model.declared) if model else None,
        extra_env={interface.ENV_SEAL: ctx.seal.digest if ctx.seal else ""},
        launcher=orphans.launcher_identity(),
        slurm_job=slurm_identity.job_id(os.environ),
        render_nodes=ctx.render_nodes,
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


def after_container(ctx: RunContext, mounts: list[Source]) -> list[Reason]:
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


def _started(ctx: RunContext, cid: str) -> None:
    ctx.ui.event("container", id=cid)
    warm.start()  # what the run needs after the container loads while it runs


def _interrupted(ctx: RunContext, signal: str, cid: str | None) -> None:
    """Say at once what a stop signal starts: the container's stop can take its grace."""
    what = f"container {cid[:12]}" if cid else "the launch"
    ctx.ui.event("interrupted", signal=signal, run_id=ctx.run_id,
                 doing=f"stopping {what}, then sealing run {ctx.run_id} as interrupted",
                 again="press Ctrl-C again to kill it at once" if signal == "SIGINT" else None)


def run(ctx: RunContext) -> list[Reason]:
    """Hold the lock around the container; record the interval even if interrupted.
    Returns the reasons that refused the launch, or that the container's exit left."""
    lock = ctx.lock
    if lock is None:
        raise ValueError("the launch stage needs the run's GPU lock")
    ctx.held = lock.acquire()
    ctx.ui.event("lock-acquired", lock=str(lock.path), wait_s=round(ctx.held.wait_s, 3))
    launched: list[Source] = []
    found: list[Reason] = []
    try:
        faultpoint.reach("lock-held")
        found = clear_orphans(ctx, lock)
        if found:
            return found
        mounts, model, found = resolve_sources(ctx)
        if found:
            ctx.ui.event("mounts-refused", reasons=[str(r) for r in found])
            return found
        vec = build_vector(ctx, mounts, model)
        obs = ctx.run_dir / interface.OBSERVATIONS_DIR
        obs.mkdir()
        obs.chmod(0o777)  # the container may run as a non-root user
        write_json(ctx.run_dir / layout.VECTOR, vec.evidence())
        ctx.ui.event("launch", run_id=ctx.run_id, image=ctx.image_id)
        launched = mounts
        out = execute.run(vec, ctx.run_dir, timeout=ctx.control.timeout,
                          grace=ctx.control.stop_grace,
                          on_started=lambda cid: _started(ctx, cid),
                          on_interrupt=lambda sig, cid: _interrupted(ctx, sig, cid))
        ctx.outcome = out.as_dict()
    finally:
        try:
            found += after_container(ctx, launched)  # the container has exited (or stopped)
        finally:
            lock.release()
            ctx.ui.event("lock-released", hold_s=ctx.held.hold_s)
    write_json(ctx.run_dir / layout.OUTCOME, ctx.outcome)
    return found

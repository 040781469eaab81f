"""Stage 1, before the lock: is everything that defines this run as pinned?

Checks the image Id against images.lock, takes the source seal, hashes the pinned model
files and checks the device profile's prerequisites. Nothing here launches anything.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from harness.base.atomic import write_json
from harness.base.catalogue import (
    ENV_DEVICE,
    ENV_GPU_MAP,
    ENV_LOCK_NETWORK_FS,
    ENV_MISSING_IMAGE,
    ENV_MODEL_DIR,
    ENV_NO_ENGINE,
    IMAGE_ID_MISMATCH,
    IMAGE_NOT_PINNED,
    MODEL_HASH,
    MODEL_MISSING,
    MODEL_UNPINNED,
)
from harness.base.errors import EnvironmentFault, InvalidInput
from harness.base.reason import Reason
from harness.config import gpumap
from harness.judge.approval import check as approval
from harness.measure import engine, modelcache
from harness.measure.host import fstype, identity
from harness.measure.imagepin import how_to_obtain
from harness.measure.provenance import git_state
from harness.measure.runfolder import layout
from harness.measure.seal import source_seal
from harness.measure.slurm import identity as slurm_identity
from harness.pipeline.context import RunContext

DEVICE_PATHS = {"rocm": ("/dev/kfd", "/dev/dri"), "cpu": ()}


def check_image(ctx: RunContext) -> list[Reason]:
    lock = ctx.loaded.image_lock
    pinned = lock.images.get(ctx.control.image) if lock else None
    if pinned is None:
        return [Reason(IMAGE_NOT_PINNED, f"{ctx.control.image!r} is not in images.lock")]
    try:
        found = engine.local_image(pinned.id)
    except EnvironmentFault as e:
        return [Reason(ENV_NO_ENGINE, e.message)]
    if found is not None and found.get("Id") == pinned.id:
        ctx.image_id = pinned.id
        return []
    by_ref = engine.local_image(pinned.ref) if pinned.ref else None
    if by_ref is not None:
        return [Reason(IMAGE_ID_MISMATCH, f"{ctx.control.image}: local {pinned.ref} is "
                       f"{by_ref.get('Id')}, images.lock pins {pinned.id}")]
    return [Reason(ENV_MISSING_IMAGE, f"{ctx.control.image}: image {pinned.id} is not in the "
                   f"local engine; {how_to_obtain(pinned.model_dump())}")]


def model_cache_path() -> Path | None:
    """The stat cache for model hashes; HARNESS_MODEL_CACHE=off hashes every file every time."""
    setting = os.environ.get("HARNESS_MODEL_CACHE", "")
    if setting.lower() in ("off", "0", "no"):
        return None
    return Path(setting) if setting else modelcache.default_cache_path()


def hash_model(model_dir: Path, pinned: dict[str, str]) -> tuple[dict[str, str], list[Reason]]:
    """Hash each pinned model file (unchanged files come from the stat cache: any change of
    device, inode, size, mtime or ctime forces a full hash); name each missing or different."""
    reasons, paths = [], {}
    for rel in sorted(pinned):
        p = model_dir / rel
        if not p.is_file():
            reasons.append(Reason(MODEL_MISSING, f"{p} does not exist"))
        else:
            paths[rel] = p
    got = modelcache.hash_files(paths, model_cache_path())
    for rel, digest in got.items():
        want = pinned[rel] if pinned[rel].startswith("sha256:") else "sha256:" + pinned[rel]
        if digest != want:
            reasons.append(Reason(MODEL_HASH, f"{rel}: {digest} but pinned {want}"))
    return got, reasons


def check_model(ctx: RunContext) -> list[Reason]:
    if ctx.control.model is None:
        return []
    if not ctx.control.model.sha256:
        return [Reason(MODEL_UNPINNED, f"model {ctx.control.model.source} has no pinned "
                       "sha256 (pin its files with `harness model pin DIR`)")]
    declared = ctx.model_declared
    if declared is None or not declared.is_dir():
        return [Reason(ENV_MODEL_DIR, f"model folder {declared} does not exist")]
    # Hash the real folder, so what the launch mounts is what was hashed (it compares).
    ctx.model_real = Path(os.path.realpath(declared))
    ctx.model_hashes, reasons = hash_model(ctx.model_real, ctx.control.model.sha256)
    return reasons


def check_device(ctx: RunContext) -> list[Reason]:
    return [Reason(ENV_DEVICE, f"the {ctx.control.device} profile needs {p}, which is absent")
            for p in DEVICE_PATHS[ctx.control.device] if not Path(p).exists()]


def check_gpu_map(ctx: RunContext) -> list[Reason]:
    """In a Slurm job on the rocm profile, find the allocated GPUs' render nodes in the
    host's GPU map: the container gets only those (vector.device_args). A job whose GPUs
    the map does not name is refused here, before any container starts."""
    if ctx.control.device != "rocm" or slurm_identity.job_id(os.environ) is None:
        return []
    nodes, problem = job_render_nodes(os.environ)
    if problem is not None:
        return [Reason(ENV_GPU_MAP, problem)]
    ctx.render_nodes = nodes
    return []


def job_render_nodes(environ: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """The render nodes of the GPUs this job was given (SLURM_JOB_GPUS, through the GPU
    map), or why there are none: no indexes, no map, an invalid map, an index it lacks, a
    node that is not a character device."""
    indexes = slurm_identity.gpu_indexes(environ)
    if indexes is None:
        return (), ("this Slurm job names no allocated GPU (SLURM_JOB_GPUS absent or not a "
                    "list of indexes): ask for --gres=gpu:N")
    path = gpumap.map_path(environ)
    if not os.path.lexists(path):
        return (), (f"no GPU map at {path}: the site admin writes it (docs/slurm.md, "
                    "'The GPU map'); HARNESS_GPU_MAP names another file")
    try:
        gmap = gpumap.load_map(path)
    except InvalidInput as e:
        return (), "; ".join([e.message, *e.faults])[:2000]
    nodes, missing = gpumap.nodes_for(gmap, indexes)
    if missing:
        return (), (f"Slurm allocated GPU(s) {', '.join(map(str, missing))}, which the GPU "
                    f"map {path} does not name ({gmap.describe()})")
    absent = [n for n in nodes if not _is_char_device(n)]
    if absent:
        return (), (f"the GPU map {path} names {', '.join(absent)}, which is not a character "
                    "device on this host")
    return nodes, None


def _is_char_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def check_lock_fs(ctx: RunContext) -> list[Reason]:
    """A GPU lock on a network file system: refused in a Slurm job, a warning elsewhere."""
    path = ctx.loaded.lock_path
    problem = fstype.lock_fs_problem(str(path), fstype.fs_type(path),
                                     fstype.under_slurm(os.environ))
    if problem is None:
        return []
    if problem[0] == "warn":
        ctx.ui.event("warning", rule=ENV_LOCK_NETWORK_FS, message=problem[1])
        return []
    return [Reason(ENV_LOCK_NETWORK_FS, problem[1])]


def run(ctx: RunContext) -> list[Reason]:
    # What the run before measured a few ms ago (pipeline.context.Carried), when fresh.
    inputs = ctx.loaded.files()
    carried = ctx.carried if ctx.carried is not None and ctx.carried.usable(inputs) else None
    ctx.seal = (carried.seal if carried is not None and carried.seal is not None
                else source_seal(ctx.loaded.project_dir, inputs))
    ctx.provenance = git_state(ctx.loaded.project_dir)
    ctx.approval, reasons = approval.for_run(ctx.loaded, ctx.seal.digest, inputs)
    reasons += check_lock_fs(ctx) + check_image(ctx) + check_model(ctx) + check_device(ctx)
    reasons += check_gpu_map(ctx)
    if not reasons:
        snapshot = (carried.host if carried is not None and carried.host is not None
                    else identity.snapshot(docker_client=engine.client()))
        write_json(ctx.run_dir / layout.HOST_BEFORE, snapshot, exclusive=True)
    write_json(ctx.run_dir / layout.PREFLIGHT, {
        "schema": "harness.preflight/v1",
        "source_seal": ctx.seal.as_dict(),
        "carried": None if carried is None else carried.record(host=not reasons),
        "provenance": ctx.provenance,
        "image": {"name": ctx.control.image, "id": ctx.image_id},
        "model_hashes": ctx.model_hashes,
        "model_path": None if ctx.control.model is None else {
            "declared": str(ctx.model_declared),
            "real": str(ctx.model_real) if ctx.model_real else None},
        "model_cache": str(model_cache_path()) if ctx.control.model else None,
        "reasons": [str(r) for r in reasons],
    })
    return reasons

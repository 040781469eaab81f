"""Before the lock: is everything that defines this run as pinned (image, seal, inputs,
model, device), then the evidence of its phase. Each check is pure,
`(facts) -> (value, reasons)`; `run` gathers the facts around them."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import replace
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
from harness.config import gpumapfile
from harness.config.schema import LockedImage, Model
from harness.measure import engine, modelcache
from harness.measure.host import fstype
from harness.measure.imagepin import how_to_obtain
from harness.measure.provenance import approval_aside, git_state, harness_state
from harness.measure.runfolder import layout
from harness.measure.seal import source_seal
from harness.measure.slurm import identity as slurm_identity
from harness.pipeline import evidence
from harness.pipeline.context import RunContext
from harness.pipeline.evidence.source import PREFLIGHT, Scene
from harness.pipeline.keepinputs import keep as keep_inputs
from harness.pipeline.results import Carried, Preflight
from harness.pipeline.stage import Keep
from harness.probe.approval import runcheck as approval

DEVICE_PATHS = {"rocm": ("/dev/kfd", "/dev/dri"), "cpu": ()}


def image_check(name: str, pinned: LockedImage | None, by_id: dict | None,
                by_ref: dict | None, engine_error: str | None = None
                ) -> tuple[str | None, list[Reason]]:
    """Pure: (the image Id the run uses, or None; why it may not)."""
    if pinned is None:
        return None, [Reason(IMAGE_NOT_PINNED, f"{name!r} is not in images.lock")]
    if engine_error is not None:
        return None, [Reason(ENV_NO_ENGINE, engine_error)]
    if by_id is not None and by_id.get("Id") == pinned.id:
        return pinned.id, []
    if by_ref is not None:
        return None, [Reason(IMAGE_ID_MISMATCH, f"{name}: local {pinned.ref} is "
                             f"{by_ref.get('Id')}, images.lock pins {pinned.id}")]
    return None, [Reason(ENV_MISSING_IMAGE, f"{name}: image {pinned.id} is not in the "
                         f"local engine; {how_to_obtain(pinned.model_dump())}")]


def look_up_image(ctx: RunContext) -> tuple[str | None, list[Reason]]:
    """Ask the engine for the pinned image (by Id, then by ref only when that is not it)."""
    name = ctx.control.image
    lock = ctx.loaded.image_lock
    pinned = lock.images.get(name) if lock else None
    if pinned is None:
        return image_check(name, None, None, None)
    try:
        by_id = engine.local_image(pinned.id)
    except EnvironmentFault as e:
        return image_check(name, pinned, None, None, e.message)
    found = by_id is not None and by_id.get("Id") == pinned.id
    by_ref = engine.local_image(pinned.ref) if pinned.ref and not found else None
    return image_check(name, pinned, by_id, by_ref)


def model_cache_path() -> Path | None:
    """The stat cache for model hashes; HARNESS_MODEL_CACHE=off hashes every file every time."""
    setting = os.environ.get("HARNESS_MODEL_CACHE", "")
    if setting.lower() in ("off", "0", "no"):
        return None
    return Path(setting) if setting else modelcache.default_cache_path()


def model_comparison(model_dir: Path, pinned: Mapping[str, str], absent: list[str],
                     got: Mapping[str, str]) -> list[Reason]:
    """Pure: each pinned file `absent`, and each whose digest is not the pinned one."""
    reasons = [Reason(MODEL_MISSING, f"{model_dir / rel} does not exist") for rel in absent]
    for rel, digest in got.items():
        want = pinned[rel] if pinned[rel].startswith("sha256:") else "sha256:" + pinned[rel]
        if digest != want:
            reasons.append(Reason(MODEL_HASH, f"{rel}: {digest} but pinned {want}"))
    return reasons


def hash_model(model_dir: Path, pinned: dict[str, str]) -> tuple[dict[str, str], list[Reason]]:
    """Hash each pinned model file (through the stat cache); name each missing or different."""
    paths = {rel: model_dir / rel for rel in sorted(pinned)}
    absent = [rel for rel, p in paths.items() if not p.is_file()]
    got = modelcache.hash_files({rel: p for rel, p in paths.items() if rel not in absent},
                                model_cache_path())
    return got, model_comparison(model_dir, pinned, absent, got)


def model_check(model: Model | None, declared: Path | None, is_dir: bool) -> list[Reason]:
    """Pure: may the model be hashed at all: pinned, and its folder there."""
    if model is None:
        return []
    if not model.sha256:
        return [Reason(MODEL_UNPINNED, f"model {model.source} has no pinned sha256 (pin its "
                       "files with `harness model pin DIR`)")]
    if declared is None or not is_dir:
        return [Reason(ENV_MODEL_DIR, f"model folder {declared} does not exist")]
    return []


def hash_declared_model(ctx: RunContext) -> tuple[Path | None, dict[str, str], list[Reason]]:
    """(real folder, digests, refusals): the real folder is hashed, as the launch mounts it."""
    model, declared = ctx.control.model, ctx.model_declared
    refused = model_check(model, declared, declared is not None and declared.is_dir())
    if model is None or declared is None or refused:
        return None, {}, refused
    real = Path(os.path.realpath(declared))
    hashes, reasons = hash_model(real, model.sha256)
    return real, hashes, reasons


def device_check(device: str, absent: list[str]) -> list[Reason]:
    """Pure: the device profile's paths that are `absent` from this host."""
    return [Reason(ENV_DEVICE, f"the {device} profile needs {p}, which is absent")
            for p in absent]


def absent_devices(device: str) -> list[str]:
    return [p for p in DEVICE_PATHS[device] if not Path(p).exists()]


def nodes_check(nodes: tuple[str, ...], problem: str | None
                ) -> tuple[tuple[str, ...] | None, list[Reason]]:
    """Pure: the render nodes the container gets, or why the job may not run."""
    return (None, [Reason(ENV_GPU_MAP, problem)]) if problem is not None else (nodes, [])


def render_nodes(device: str, environ: Mapping[str, str]
                 ) -> tuple[tuple[str, ...] | None, list[Reason]]:
    """In a Slurm job on rocm, the allocated GPUs' render nodes from the host's GPU map
    (the container gets only those), or the refusal; None elsewhere (every node)."""
    if device != "rocm" or slurm_identity.job_id(environ) is None:
        return None, []
    return nodes_check(*job_render_nodes(environ))


def job_render_nodes(environ: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """The render nodes of this job's GPUs (SLURM_JOB_GPUS through the GPU map), or why
    there are none."""
    indexes = slurm_identity.gpu_indexes(environ)
    if indexes is None:
        return (), ("this Slurm job names no allocated GPU (SLURM_JOB_GPUS absent or not a "
                    "list of indexes): ask for --gres=gpu:N")
    path = gpumapfile.map_path(environ)
    if not os.path.lexists(path):
        return (), (f"no GPU map at {path}: the site admin writes it (docs/slurm.md, "
                    "'The GPU map'); HARNESS_GPU_MAP names another file")
    try:
        gmap = gpumapfile.load_map(path)
    except InvalidInput as e:
        return (), "; ".join([e.message, *e.faults])[:2000]
    nodes, missing = gpumapfile.nodes_for(gmap, indexes)
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


def lock_fs_check(problem: tuple[str, str] | None) -> tuple[str | None, list[Reason]]:
    """Pure: the lock's file system problem: refused in a Slurm job, else a warning."""
    if problem is None:
        return None, []
    if problem[0] == "warn":
        return problem[1], []
    return None, [Reason(ENV_LOCK_NETWORK_FS, problem[1])]


def lock_fs(ctx: RunContext) -> list[Reason]:
    path = ctx.loaded.lock_path
    warning, reasons = lock_fs_check(fstype.lock_fs_problem(
        str(path), fstype.fs_type(path), fstype.under_slurm(os.environ)))
    if warning is not None:
        ctx.ui.event("warning", rule=ENV_LOCK_NETWORK_FS, message=warning)
    return reasons


def record(ctx: RunContext, found: Preflight, carried: Carried | None) -> dict:
    """Pure: preflight.json."""
    return {
        "schema": "harness.preflight/v1",
        "source_seal": found.seal.as_dict() if found.seal else None,
        "carried": None if carried is None else carried.record(host=not found.reasons),
        "provenance": found.provenance,
        "harness": found.harness,
        "image": {"name": ctx.control.image, "id": found.image_id},
        "model_hashes": found.model_hashes,
        "model_path": None if ctx.control.model is None else {
            "declared": str(ctx.model_declared),
            "real": str(found.model_real) if found.model_real else None},
        "model_cache": str(model_cache_path()) if ctx.control.model else None,
        **evidence.blocks(layout.PREFLIGHT, found.gathered),
        "reasons": [str(r) for r in found.reasons],
    }


def run(ctx: RunContext, keep: Keep[Preflight]) -> Preflight:
    # What the run before measured a few ms ago (pipeline.results.Carried), when fresh.
    inputs = ctx.loaded.files()
    carried = ctx.carried if ctx.carried is not None and ctx.carried.usable(inputs) else None
    seal = (carried.seal if carried is not None and carried.seal is not None
            else source_seal(ctx.loaded.project_dir, inputs))
    found = keep(Preflight(seal=seal))
    kept_reasons = keep_inputs(ctx, seal)  # inputs/: the sealed bytes of campaign and control
    approved, reasons = approval.for_run(ctx.loaded, seal.digest, inputs,
                                         runs_dir=ctx.run_dir.parent)
    reasons = kept_reasons + reasons
    found = keep(replace(found, approval=approved))
    # one read: the harness's too, in-tree; the run's own new approval is no change of it
    project = approval_aside(git_state(ctx.loaded.project_dir), ctx.loaded.project_dir,
                             approved)
    found = keep(replace(found, provenance=project,
                         harness=harness_state(known=(ctx.loaded.project_dir, project))))
    reasons += lock_fs(ctx)
    image_id, refused = look_up_image(ctx)
    found = keep(replace(found, image_id=image_id))
    model_real, hashes, more = hash_declared_model(ctx)
    found = keep(replace(found, model_real=model_real, model_hashes=hashes))
    reasons += refused + more + device_check(ctx.control.device,
                                             absent_devices(ctx.control.device))
    nodes, refused = render_nodes(ctx.control.device, os.environ)
    found = keep(replace(found, render_nodes=nodes, reasons=tuple(reasons + refused)))
    got = evidence.gather(PREFLIGHT, Scene(ctx))
    found = keep(replace(found, gathered=got, reasons=found.reasons + evidence.reasons(got)))
    write_json(ctx.run_dir / layout.PREFLIGHT, record(ctx, found, carried))
    return found

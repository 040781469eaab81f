"""`run_checks`: every doctor check, in report order (the night runner calls it per
control): each fact gathered here or in `measure`, each line `judge.doctor`'s."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.judge.doctor.checks import (
    GIB,
    PROFILES,
    Check,
    gpu_skipped,
    judge_disk,
    judge_engine,
    judge_gpu_tools,
    judge_groups,
    judge_images,
    judge_kernel_log,
    judge_kfd,
    judge_lock,
    judge_lock_fs,
    judge_render,
    soften,
)
from harness.judge.doctor.gpulines import judge as judge_map
from harness.measure import engine, kmsg
from harness.measure.host import fstype, tools
from harness.measure.imagestore import image_store
from harness.probe import idlewait
from harness.probe.doctor import gpufacts, hostfacts


def run_checks(*, lock_path: Path, runs_dir: Path,
               images: Mapping[str, Mapping[str, Any]] | None = None, profile: str = "rocm",
               required_gfx: str | None = None, warn_free_bytes: int = 10 * GIB,
               fail_free_bytes: int = 1 * GIB, tool_timeout: float = 20.0,
               search_path: str | None = None, docker_client: Any | None = None,
               dev: str = "/dev", gpu_map: Path | None = None, strict_map: bool = False,
               gres_conf: Path | None = None, skip_gpu: str | None = None) -> list[Check]:
    """One Check per line; never raises for a sick host. `images`: as in images.lock (None
    skips them); `strict_map`: the GPU map is required and its lines never softened (the
    Slurm health check); `skip_gpu`, a reason, replaces the GPU lines with one `skip`."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")
    checks = _engine_checks(images, docker_client)
    if skip_gpu is not None:
        checks.append(gpu_skipped(skip_gpu))
    else:
        gpu = _gpu_checks(dev, required_gfx, tool_timeout, search_path)
        checks += [soften(c) for c in gpu] if profile == "cpu" else gpu
    if skip_gpu is None or profile == "cpu":
        client = docker_client if docker_client is not None else engine.try_client(
            hostfacts.ENGINE_TIMEOUT_S)[0]
        checks.append(Check("idle gpu", *idlewait.doctor_line(profile, client)))
    checks += _map_checks(profile, gpu_map, strict_map, gres_conf)

    kernel = kmsg.mark()
    measured_at, free = hostfacts.free_space(Path(runs_dir))
    return [*checks, judge_lock(**hostfacts.lock_facts(Path(lock_path))),
            judge_lock_fs(str(lock_path), fstype.fs_type(Path(lock_path)),
                          fstype.under_slurm(os.environ)),
            judge_kernel_log(kernel.source, kernel.kind, kernel.error),
            judge_disk(str(runs_dir), free, warn_free_bytes, fail_free_bytes,
                       None if Path(runs_dir).is_dir() else measured_at)]


def _map_checks(profile: str, given: Path | None, strict: bool,
                gres_conf: Path | None) -> list[Check]:
    """The GPU map's lines: required on a Slurm rocm node, when named, or when `strict`
    (the health check serves every job); softened on `cpu` otherwise."""
    slurm = fstype.under_slurm(os.environ)
    facts = gpufacts.gather(os.environ, given=given, gres_conf=gres_conf,
                          required=strict or (slurm and profile == "rocm"))
    lines = judge_map(facts)
    if profile == "cpu" and not strict and given is None:
        return [soften(c) for c in lines]
    return lines


def _engine_checks(images: Mapping[str, Mapping[str, Any]] | None,
                   docker_client: Any | None) -> list[Check]:
    """The engine line, then one line per locked image (none when `images` is None)."""
    client, err = ((docker_client, None) if docker_client is not None
                   else engine.try_client(hostfacts.ENGINE_TIMEOUT_S))
    version, info, engine_err = engine.facts(client) if client is not None else (None, None, err)
    checks = [judge_engine(version, info, engine_err)]
    if images is not None:
        if engine_err is None and client is not None:
            found, by_ref = hostfacts.image_ids(client, images)
            checks += judge_images(images, found, by_ref, image_store(info or {}))
        else:
            checks += judge_images(images, {}, {}, None, engine_error=engine_err)
    return checks


def _gpu_checks(dev: str, required_gfx: str | None, tool_timeout: float,
                search_path: str | None) -> list[Check]:
    """Device nodes, the user's access to them, and what the GPU tools say."""
    kfd = hostfacts.device_node(f"{dev}/kfd")
    renders = hostfacts.render_nodes(f"{dev}/dri")
    user, uid, gids = hostfacts.current_user()
    return [judge_kfd(kfd), judge_render(renders),
            judge_groups([kfd, *renders], user, uid, gids),
            *judge_gpu_tools(tools.rocminfo(tool_timeout, search_path),
                             tools.amd_smi_static(tool_timeout, search_path), required_gfx)]

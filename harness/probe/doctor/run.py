"""`run_checks`: every doctor check, in report order; the night runner calls it per control.

Gathers each fact here or in harness.measure (the engine, the GPU tools, the kernel log)
and asks harness.judge.doctor for its line."""

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
from harness.judge.doctor.gpumap import judge as judge_map
from harness.measure import engine, kmsg
from harness.measure.host import fstype, tools
from harness.measure.imagestore import image_store
from harness.probe.doctor import gpumap, host


def run_checks(
    *,
    lock_path: Path,
    runs_dir: Path,
    images: Mapping[str, Mapping[str, Any]] | None = None,
    profile: str = "rocm",
    required_gfx: str | None = None,
    warn_free_bytes: int = 10 * GIB,
    fail_free_bytes: int = 1 * GIB,
    tool_timeout: float = 20.0,
    search_path: str | None = None,
    docker_client: Any | None = None,
    dev: str = "/dev",
    gpu_map: Path | None = None,
    strict_map: bool = False,
    gres_conf: Path | None = None,
    skip_gpu: str | None = None,
) -> list[Check]:
    """Run every check and return one Check per line; nothing here raises for a sick host.

    `images` is {name: {"id": "sha256:...", "ref": ..., "store": ...}} as in images.lock;
    None skips the image lines (the caller has no lock). On the `cpu` profile the GPU lines
    are at worst 'warn'. `search_path` overrides where rocminfo/amd-smi are looked up.
    `gpu_map` names the host's GPU map (default: HARNESS_GPU_MAP, else
    /etc/harness/gpu-map.yaml); `strict_map` requires it and never softens its lines (the
    Slurm health check); `gres_conf` is the gres.conf it is compared with (default: beside
    SLURM_CONF). `skip_gpu`, a reason, replaces the GPU lines with one `skip` line and
    probes no GPU tool (a campaign that never uses the GPU).
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")
    checks = _engine_checks(images, docker_client)
    if skip_gpu is not None:
        checks.append(gpu_skipped(skip_gpu))
    else:
        gpu = _gpu_checks(dev, required_gfx, tool_timeout, search_path)
        checks += [soften(c) for c in gpu] if profile == "cpu" else gpu
    checks += _map_checks(profile, gpu_map, strict_map, gres_conf)

    facts = host.lock_facts(Path(lock_path))
    checks.append(judge_lock(**facts))
    checks.append(judge_lock_fs(str(lock_path), fstype.fs_type(Path(lock_path)),
                                fstype.under_slurm(os.environ)))
    kernel = kmsg.mark()
    checks.append(judge_kernel_log(kernel.source, kernel.kind, kernel.error))
    measured_at, free = host.free_space(Path(runs_dir))
    checks.append(
        judge_disk(
            str(runs_dir),
            free,
            warn_free_bytes,
            fail_free_bytes,
            None if Path(runs_dir).is_dir() else measured_at,
        )
    )
    return checks


def _map_checks(profile: str, given: Path | None, strict: bool,
                gres_conf: Path | None) -> list[Check]:
    """The GPU map's lines. Required on a Slurm node for the rocm profile, when named, or
    when `strict` (the health check: the node serves every job, whatever this campaign
    runs); softened on the `cpu` profile unless named or strict."""
    slurm = fstype.under_slurm(os.environ)
    facts = gpumap.gather(os.environ, given=given, gres_conf=gres_conf,
                          required=strict or (slurm and profile == "rocm"))
    lines = judge_map(facts)
    if profile == "cpu" and not strict and given is None:
        return [soften(c) for c in lines]
    return lines


def _engine_checks(
    images: Mapping[str, Mapping[str, Any]] | None, docker_client: Any | None
) -> list[Check]:
    """The engine line, then one line per locked image (none when `images` is None)."""
    client, err = (
        (docker_client, None)
        if docker_client is not None
        else engine.try_client(host.ENGINE_TIMEOUT_S)
    )
    version, info, engine_err = engine.facts(client) if client is not None else (None, None, err)
    checks = [judge_engine(version, info, engine_err)]
    if images is not None:
        if engine_err is None and client is not None:
            found, by_ref = host.image_ids(client, images)
            checks += judge_images(images, found, by_ref, image_store(info or {}))
        else:
            checks += judge_images(images, {}, {}, None, engine_error=engine_err)
    return checks


def _gpu_checks(
    dev: str, required_gfx: str | None, tool_timeout: float, search_path: str | None
) -> list[Check]:
    """Device nodes, the user's access to them, and what the GPU tools say."""
    kfd = host.device_node(f"{dev}/kfd")
    renders = host.render_nodes(f"{dev}/dri")
    user, uid, gids = host.current_user()
    return [
        judge_kfd(kfd),
        judge_render(renders),
        judge_groups([kfd, *renders], user, uid, gids),
        *judge_gpu_tools(
            tools.rocminfo(tool_timeout, search_path),
            tools.amd_smi_static(tool_timeout, search_path),
            required_gfx,
        ),
    ]

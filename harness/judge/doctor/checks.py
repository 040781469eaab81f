"""The doctor's decisions: facts about the host in, one ok/warn/fail line per check out.

Pure, so each verdict is tested without a GPU, a Docker engine or a particular disk."""

from __future__ import annotations

import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from harness.measure.host.fstype import lock_fs_problem
from harness.measure.host.parsers import base_gfx, gib
from harness.measure.host.tools import GpuView, ToolRun, read_amd_smi, read_rocminfo
from harness.measure.imagepin import how_to_obtain
from harness.measure.imagestore import image_store, store_kind

Status = Literal["ok", "warn", "fail", "skip"]
PROFILES = ("rocm", "cpu")
GIB = 1024**3


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    status: Status
    detail: str


GPU_CHECKS = ("/dev/kfd", "/dev/dri/renderD*", "device groups", "rocminfo", "amd-smi", "gpu")


def gpu_skipped(why: str) -> Check:
    """Pure: the one line that stands for every GPU check not run, and why."""
    return Check("gpu", "skip", f"GPU checks skipped ({', '.join(GPU_CHECKS)}): {why}")


def soften(check: Check) -> Check:
    """On the `cpu` profile a missing GPU is worth knowing, not a reason to stop."""
    return replace(check, status="warn") if check.status == "fail" else check


def any_failed(checks: Iterable[Check]) -> bool:
    return any(c.status == "fail" for c in checks)


# --------------------------------------------------------------------------- Docker


def store_meaning(store: str) -> str:
    return "image Id = manifest digest" if store == "containerd" else "image Id = config digest"


def judge_engine(version: Mapping[str, Any] | None, info: Mapping[str, Any] | None,
                 error: str | None) -> Check:
    if error or version is None or info is None:
        return Check("engine", "fail", f"Docker engine unreachable: {error or 'no answer'}")
    store = image_store(info)
    return Check("engine", "ok", f"Docker {version.get('Version', '?')} (API "
                 f"{version.get('ApiVersion', '?')}), storage driver {info.get('Driver', '?')}, "
                 f"{store} image store ({store_meaning(store)})")


def judge_images(expected: Mapping[str, Mapping[str, Any]], found: Mapping[str, str | None],
                 ref_ids: Mapping[str, str | None], store: str | None,
                 engine_error: str | None = None) -> list[Check]:
    """One line per images.lock entry. `found` is looked up by locked Id; `ref_ids` (the
    local Id its `ref` tag points at) only explains a miss."""
    if engine_error is not None:
        return [Check("images", "fail",
                      f"cannot check images.lock: engine unreachable ({engine_error})")]
    if not expected:
        return [Check("images", "warn", "images.lock names no images")]
    checks = []
    for name in sorted(expected):
        entry = expected[name] or {}
        want = str(entry.get("id") or "")
        got = found.get(name)
        label = f"image {name}"
        if not want:  # a campaign's control names it; the lock has no entry yet
            checks.append(Check(label, "fail", "not pinned in images.lock, so every run is "
                                f"refused: `harness images pin {name} REF`"))
        elif not want.startswith("sha256:"):
            checks.append(Check(label, "fail", f"images.lock id {want!r} is not a full sha256 Id"))
        elif got == want:
            checks.append(Check(label, "ok", f"present as {want}"))
        else:
            checks.append(Check(label, "fail",
                                _image_miss(want, got, entry, ref_ids.get(name), store)))
    return checks


def _image_miss(want: str, got: str | None, entry: Mapping[str, Any], ref_id: str | None,
                store: str | None) -> str:
    parts = [f"{want} not present locally"]
    if got is not None:
        parts = [f"lookup of {want} returned {got}"]
    ref = entry.get("ref")
    if ref and ref_id and ref_id != want:
        parts.append(f"tag {ref} points at {ref_id}")
    locked_store = store_kind(entry.get("store"))
    if locked_store and store and locked_store != store:
        parts.append(f"locked on a {locked_store} daemon, this one uses {store} "
                     f"({store_meaning(store)})")
    parts.append(how_to_obtain(entry))
    return "; ".join(parts)


# --------------------------------------------------------------------------- devices


@dataclass(frozen=True)
class DeviceNode:
    """What stat() said about one device node; `exists` False means the path is missing."""

    path: str
    exists: bool
    mode: int = 0
    gid: int = -1
    group: str | None = None


def judge_kfd(node: DeviceNode) -> Check:
    if not node.exists:
        return Check("/dev/kfd", "fail", "missing: amdgpu/KFD driver not loaded (no ROCm compute)")
    if not stat.S_ISCHR(node.mode):
        return Check("/dev/kfd", "fail", "exists but is not a character device")
    return Check("/dev/kfd", "ok", f"character device, group {node.group or node.gid}")


def judge_render(nodes: list[DeviceNode]) -> Check:
    chars = [n for n in nodes if n.exists and stat.S_ISCHR(n.mode)]
    if not chars:
        return Check("/dev/dri/renderD*", "fail",
                     "no render nodes: no GPU exposed by the DRM driver")
    names = ", ".join(n.path.rsplit("/", 1)[-1] for n in chars)
    return Check("/dev/dri/renderD*", "ok", f"{len(chars)} render node(s): {names}")


def _can_open(node: DeviceNode, uid: int, gids: set[int]) -> bool:
    if uid == 0:
        return True
    rw = stat.S_IRGRP | stat.S_IWGRP
    other = stat.S_IROTH | stat.S_IWOTH
    return (node.mode & other) == other or (node.gid in gids and (node.mode & rw) == rw)


def judge_groups(nodes: list[DeviceNode], user: str, uid: int, gids: set[int]) -> Check:
    present = [n for n in nodes if n.exists]
    if not present:
        return Check("device groups", "fail", "no GPU device nodes to open")
    if uid == 0:
        return Check("device groups", "ok", f"user {user} is root: can open every device node")
    missing = [n for n in present if not _can_open(n, uid, gids)]
    if not missing:
        groups = sorted({n.group or str(n.gid) for n in present})
        return Check("device groups", "ok",
                     f"user {user} can open all nodes (groups {', '.join(groups)})")
    need = sorted({n.group or str(n.gid) for n in missing})
    paths = ", ".join(n.path for n in missing)
    return Check("device groups", "fail",
                 f"user {user} is not in group(s) {', '.join(need)} owning {paths}; "
                 f"fix: sudo usermod -aG {','.join(need)} {user} and log in again")


# --------------------------------------------------------------------------- GPU tools


def _describe(view: GpuView) -> str:
    return "; ".join(f"{t or 'gfx?'} {n or 'unnamed'} {gib(v)}" for t, n, v in view.gpus)


def judge_gpu_tools(rocminfo: ToolRun, amd_smi: ToolRun, required_gfx: str | None) -> list[Check]:
    """Lines for rocminfo, amd-smi and the GPU they describe. Either tool is enough: a
    missing tool fails only when the other did not give the GPU either."""
    r_view, _, r_err = read_rocminfo(rocminfo)
    s_view, _, s_err = read_amd_smi(amd_smi)
    views = [v for v in (r_view, s_view) if v is not None and v.gpus]
    lines = []
    for tool, view, err in (("rocminfo", r_view, r_err), ("amd-smi", s_view, s_err)):
        if err:
            lines.append(Check(tool, "warn" if views else "fail", err))
        elif not view or not view.gpus:
            lines.append(Check(tool, "warn" if views else "fail", f"{tool} ran but lists no GPU"))
        else:
            lines.append(Check(tool, "ok", _describe(view)))
    lines.append(judge_gpu(views, required_gfx))
    return lines


def judge_gpu(views: list[GpuView], required_gfx: str | None) -> Check:
    if not views:
        return Check("gpu", "fail", "no tool could describe a GPU (need rocminfo or amd-smi)")
    targets = [sorted({t for t, _, _ in v.gpus if t}) for v in views]
    if len(views) == 2 and targets[0] and targets[1] and targets[0] != targets[1]:
        return Check("gpu", "fail", f"tools disagree: rocminfo says {', '.join(targets[0])}, "
                     f"amd-smi says {', '.join(targets[1])}")
    best = views[0]
    detail = f"{_describe(best)} (from {best.source})"
    if required_gfx is None:
        return Check("gpu", "ok", detail)
    want = base_gfx(required_gfx) or required_gfx.strip().lower()
    have = sorted({t for v in views for t, _, _ in v.gpus if t})
    if want in have:
        return Check("gpu", "ok", f"required {want} present: {detail}")
    return Check("gpu", "fail",
                 f"required {want}, host has {', '.join(have) or 'no known gfx target'}")


# --------------------------------------------------------------------------- lock and disk


def judge_lock(path: str, exists: bool, is_file: bool, writable: bool, parent: str,
               parent_exists: bool, parent_writable: bool) -> Check:
    """The lock file must be writable, or creatable in its folder; the lock is not taken."""
    if exists and not is_file:
        return Check("lock", "fail", f"{path} exists but is not a regular file")
    if exists:
        return Check("lock", "ok", f"{path} exists and is writable") if writable \
            else Check("lock", "fail", f"{path} is not writable by this user")
    if not parent_exists:
        return Check("lock", "fail", f"{path}: folder {parent} does not exist")
    if not parent_writable:
        return Check("lock", "fail", f"{path} absent and folder {parent} is not writable")
    return Check("lock", "ok", f"{path} absent; folder {parent} is writable, it will be created")


def judge_disk(runs_dir: str, free_bytes: int | None, warn_bytes: int = 10 * GIB,
               fail_bytes: int = 1 * GIB, measured_at: str | None = None) -> Check:
    """Free space for new runs; `measured_at` names the ancestor used while it does not exist."""
    where = runs_dir if measured_at is None \
        else f"{runs_dir} (not created yet; measured at {measured_at})"
    if free_bytes is None:
        return Check("disk", "fail", f"cannot measure free space for {where}")
    free = f"{free_bytes / GIB:.1f} GiB free at {where}"
    if free_bytes < fail_bytes:
        return Check("disk", "fail", f"{free} (< {fail_bytes / GIB:.1f} GiB)")
    if free_bytes < warn_bytes:
        return Check("disk", "warn", f"{free} (< {warn_bytes / GIB:.1f} GiB)")
    return Check("disk", "ok", free)


def judge_lock_fs(path: str, fstype: str | None, slurm: bool) -> Check:
    """The lock must be on local disk where several hosts could mount its folder (Slurm)."""
    problem = lock_fs_problem(path, fstype, slurm)
    if problem is not None:
        return Check("lock-fs", problem[0], problem[1])
    return Check("lock-fs", "ok", f"{path} is on {fstype or 'an unknown file system'}, "
                 "not a network file system")


def judge_kernel_log(source: str, kind: str, error: str | None) -> Check:
    """Whether runs can keep the kernel log of their window. Unreadable is a warning: only a
    control with `kernel_log: {required: true}` is refused for it."""
    if error is None:
        return Check("kernel-log", "ok", f"{source} readable: runs keep the kernel's lines "
                     "from the lock to the seal")
    return Check("kernel-log", "warn", f"cannot read the kernel log ({error}); to allow it: "
                 "run the harness as root or give it CAP_SYSLOG (for /dev/kmsg), or set "
                 "kernel.dmesg_restrict=0 (for dmesg), or point HARNESS_KERNEL_LOG at a log "
                 "file the harness's user can read (rsyslog's kern.log, group adm)")

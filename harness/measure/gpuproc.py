"""Who holds the GPU now: the facts the idle-GPU check judges (harness.judge.idlegpu).

The GPU lock only orders harness runs; a process that never took it still holds VRAM and
changes what a run measures. On ROCm the kernel lists every process that opened the GPU
under `/sys/class/kfd/kfd/proc/<pid>/` (amdkfd/kfd_process.c: `vram_<gpuid>` in bytes) and
`amd-smi process --json` names them; on the cpu profile the holders are the running
containers. This module gathers and types; each root and command is a parameter for tests.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.measure import vector
from harness.measure.telemetry import amdsmi
from harness.measure.telemetry import quantities as q

KFD_PROC = Path("/sys/class/kfd/kfd/proc")
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
PROC = "/proc/{pid}"  # a process's folder; tests point it at a fixture tree
AMD_SMI_PROCESS = ("amd-smi", "process", "--json")
MAX_PIDS = 4096  # KFD process folders looked at
MAX_CONTAINERS = 512
RUN_ID_LABEL = f"{vector.LABEL_PREFIX}.run-id"
LOCK_LABEL = f"{vector.LABEL_PREFIX}.lock"
DEVICE_LABEL = f"{vector.LABEL_PREFIX}.device"
_VRAM_FILE = re.compile(r"vram_([0-9]{1,10})")
_CONTAINER_ID = re.compile(r"(?:docker-|/docker/|/libpod-|crio-)([0-9a-f]{64})")


@dataclass(frozen=True)
class Holder:
    """A process that holds the GPU; None or empty where a fact is unknown."""

    pid: int
    name: str | None
    user: str | None
    vram_bytes: int | None
    gpus: tuple[int, ...] = ()
    container: str | None = None
    source: str = "kfd"


@dataclass(frozen=True)
class Box:
    """A running container, whose run by the harness's labels; `cpuset` "": every CPU."""

    id: str
    name: str
    image: str
    cpuset: str = ""
    run_id: str | None = None
    lock: str | None = None
    device: str | None = None


@dataclass(frozen=True)
class GpuFacts:
    """One look at the GPU: holders, containers, VRAM in use, and what could not be read."""

    device: str
    holders: tuple[Holder, ...] = ()
    containers: tuple[Box, ...] = ()
    vram_used_bytes: float | None = None
    cpus: frozenset[int] = frozenset()
    errors: tuple[str, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- processes


def user_of(uid: int) -> str:
    """The login name of `uid`, or the number (a container's own users)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def process_facts(pid: int, proc: str = PROC) -> tuple[str | None, str | None, str | None]:
    """(name, user, container id) of `pid` from /proc; None for each the host hides."""
    base = Path(proc.format(pid=pid))
    try:
        user: str | None = user_of(os.stat(base).st_uid)
    except OSError:
        user = None
    cgroup = amdsmi.sysfs_text(base / "cgroup") or ""
    found = _CONTAINER_ID.search(cgroup)
    return amdsmi.sysfs_text(base / "comm"), user, found.group(1) if found else None


def gpu_indexes(nodes: Path = KFD_NODES) -> dict[int, int]:
    """KFD gpu id -> GPU index: nodes with a non-zero `gpu_id` in node order, as the ROCm
    runtime numbers GPUs. Empty when unreadable."""
    found = []
    try:
        with os.scandir(nodes) as it:
            names = [e.name for _, e in zip(range(MAX_PIDS), it, strict=False)]
    except OSError:
        return {}
    for name in sorted((n for n in names if n.isdigit()), key=int):
        text = amdsmi.sysfs_text(nodes / name / "gpu_id")
        if text and text.isdigit() and len(text) <= 10 and int(text):
            found.append(int(text))
    return {gpu_id: i for i, gpu_id in enumerate(found)}


def kfd_holders(root: Path = KFD_PROC, proc: str = PROC,
                nodes: Path = KFD_NODES) -> list[Holder]:
    """Every process the KFD lists, with its VRAM. FileNotFoundError when `root` is absent
    (no amdkfd: the holders are unknown, not none)."""
    holders = []
    index = gpu_indexes(nodes)
    with os.scandir(root) as it:
        names = [e.name for _, e in zip(range(MAX_PIDS), it, strict=False) if e.name.isdigit()]
    for name in sorted(names, key=int):
        try:
            files = os.listdir(root / name)
        except OSError:
            continue
        vram: dict[int, int] = {}
        for f in files:
            m = _VRAM_FILE.fullmatch(f)
            text = amdsmi.sysfs_text(root / name / f) if m else None
            if m and text is not None and text.isdigit() and len(text) <= 20:
                vram[int(m.group(1))] = int(text)
        proc_name, user, container = process_facts(int(name), proc)
        holders.append(Holder(int(name), proc_name, user,
                              sum(vram.values()) if vram else None,
                              tuple(sorted(index[g] for g in vram if g in index)),
                              container, "kfd"))
    return holders


def _entries(text: str) -> Iterable[tuple[int, dict]]:
    """(gpu index, process_info) of each process amd-smi lists; its idle sentinel
    ("No running processes detected") and malformed entries are skipped."""
    for gpu in amdsmi.document(text):
        index = gpu.get("gpu") if isinstance(gpu, dict) else None
        listed = gpu.get("process_list") if isinstance(gpu, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not isinstance(listed, list):
            continue
        for item in listed:
            info = item.get("process_info") if isinstance(item, dict) else None
            if isinstance(info, dict):
                yield index, info


def parse_amd_smi_process(text: str) -> list[Holder]:
    """Holders of an `amd-smi process --json` output, one per pid. amd-smi repeats a
    process under each GPU with process-wide figures, so the largest is kept, not a sum."""
    by_pid: dict[int, Holder] = {}
    for index, info in _entries(text):
        pid = info.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
            continue
        usage = info.get("memory_usage") if isinstance(info.get("memory_usage"), dict) else {}
        vram = amdsmi.amount(usage.get("vram_mem"), amdsmi.BYTES)
        if vram is None:
            vram = amdsmi.amount(info.get("mem_usage"), amdsmi.BYTES)
        name = info.get("name") if isinstance(info.get("name"), str) else None
        seen = by_pid.get(pid, Holder(pid, None, None, None, (), None, "amd-smi"))
        sizes = [int(v) for v in (vram, seen.vram_bytes) if v is not None]
        by_pid[pid] = Holder(pid, name or seen.name, None, max(sizes) if sizes else None,
                             tuple(sorted({*seen.gpus, index})), None, "amd-smi")
    return list(by_pid.values())


def rocm_facts(gpus: tuple[int, ...] | None, *, client: Any | None = None,
               kfd: Path = KFD_PROC, proc: str = PROC, nodes: Path = KFD_NODES,
               process_command: tuple[str, ...] | None = AMD_SMI_PROCESS,
               metric_command: tuple[str, ...] | None = ("amd-smi", "metric", "--json"),
               timeout_s: float = 10.0) -> GpuFacts:
    """KFD holders, named and sized by amd-smi where it lists the same pid, the VRAM in use
    (as the telemetry source reads it), the harness's containers; unreadable: an error."""
    boxes, errors = _listed(client, inspect=False) if client is not None else ((), [])
    holders: dict[int, Holder] = {}
    try:
        holders = {h.pid: h for h in kfd_holders(kfd, proc, nodes)}
    except OSError as e:
        errors.append(f"{kfd}: {e.strerror or e}")
    if process_command is not None:
        try:
            text = amdsmi.run_bounded(process_command, timeout_s)
            for h in parse_amd_smi_process(text):
                own = holders.get(h.pid)
                holders[h.pid] = h if own is None else Holder(
                    own.pid, own.name or h.name, own.user,
                    own.vram_bytes if own.vram_bytes is not None else h.vram_bytes,
                    own.gpus or h.gpus, own.container, "kfd+amd-smi")
        except amdsmi.AmdSmiError as e:
            errors.append(e.message)
    used = None
    if metric_command is not None:
        try:
            figures = amdsmi.AmdSmi(gpus, command=metric_command, timeout_s=timeout_s).read()
            known = [u for f in figures.values() if (u := f.get(q.VRAM_USED_BYTES)) is not None]
            used = sum(known) if known else None
        except amdsmi.AmdSmiError as e:
            errors.append(e.message)
    return GpuFacts("rocm", tuple(holders.values()), boxes, used, frozenset(),
                    tuple(dict.fromkeys(errors)))


# --------------------------------------------------------------------------- containers


def cpuset(text: str) -> frozenset[int]:
    """`0-3,8` as a set of CPUs; empty for "" (no pin) or a malformed list."""
    out: set[int] = set()
    for part in text.split(",") if text and len(text) <= 4096 else ():
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return frozenset()
        out.update(range(int(low), int(high or low) + 1))
    return frozenset(out)


def containers(client: Any, *, inspect: bool = True) -> list[Box]:
    """Running containers, with (`inspect`) the cpuset of each the harness did not launch.
    On rocm only the harness's own (a foreign one shows as its processes). Errors raise."""
    api = client.api
    out = []
    found = api.containers(filters={"status": "running"} if inspect else
                           {"status": "running", "label": RUN_ID_LABEL})
    for c in found[:MAX_CONTAINERS]:
        cpus, labels = "", c.get("Labels") or {}
        if inspect and RUN_ID_LABEL not in labels:
            try:
                host = api.inspect_container(c["Id"]).get("HostConfig") or {}
            except Exception:  # gone since it was listed: it holds nothing
                continue
            cpus = str(host.get("CpusetCpus") or "")
        out.append(Box(str(c.get("Id", "")), str((c.get("Names") or ["?"])[0]).lstrip("/"),
                       str(c.get("Image", "")), cpus, labels.get(RUN_ID_LABEL),
                       labels.get(LOCK_LABEL), labels.get(DEVICE_LABEL)))
    return out


def _listed(client: Any, *, inspect: bool) -> tuple[tuple[Box, ...], list[str]]:
    try:
        return tuple(containers(client, inspect=inspect)), []
    except Exception as e:  # the SDK raises many kinds: all mean the engine did not answer
        return (), [f"docker: {type(e).__name__}: {str(e)[:200]}"]


def cpu_facts(client: Any, cpus: frozenset[int] | None = None) -> GpuFacts:
    """The running containers and the CPUs the control uses (None: all the host's)."""
    boxes, errors = _listed(client, inspect=True)
    return GpuFacts("cpu", (), boxes, None, cpus or frozenset(range(os.cpu_count() or 1)),
                    tuple(errors))

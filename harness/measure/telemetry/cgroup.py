"""The container's own figures from its cgroup: CPU time, memory now and its peak.

The kernel's accounting (what `docker stats` shows), without a stream from the engine.
The cgroup is named by the container's init process (`/proc/<pid>/cgroup`); v1 is read
where its controllers are mounted, since a hybrid host keeps the figures there. When
the container exits its cgroup goes: a read finding every file gone raises `Gone`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.base.readfile import InputError, read_text_bounded
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry.sampler import Figures, Gone

ROOT = Path("/sys/fs/cgroup")
MAX_FILE = 64 * 1024  # cpu.stat and the rest are a few lines


@dataclass(frozen=True)
class Files:
    """Where each figure is read, and in what unit (None: not available on this host)."""

    cpu: Path | None = None
    cpu_per_s: float = 1e9  # v1 cpuacct.usage counts ns; v2 cpu.stat usage_usec counts us
    memory: Path | None = None
    peak: Path | None = None
    v2: bool = False


def files_of(lines: Sequence[str], root: Path = ROOT) -> Files:
    """Pure, but for where hierarchies are mounted: the files for a process's cgroup lines."""
    v1: dict[str, str] = {}
    unified = None
    for line in lines:
        parts = line.strip().split(":", 2)
        if len(parts) != 3 or ".." in parts[2].split("/"):
            continue
        ids, controllers, path = parts
        if ids == "0" and controllers == "":
            unified = path
        for c in controllers.split(","):
            v1[c] = path
    if "memory" in v1 and (root / "memory").is_dir():
        cpu_dir = next((root / name for name in ("cpuacct", "cpu,cpuacct", "cpu")
                        if "cpuacct" in v1 and (root / name / "cpuacct.usage").exists()), None)
        base = root / "memory" / v1["memory"].lstrip("/")
        return Files(cpu=cpu_dir / v1["cpuacct"].lstrip("/") / "cpuacct.usage" if cpu_dir
                     else None, memory=base / "memory.usage_in_bytes",
                     peak=base / "memory.max_usage_in_bytes")
    if unified is not None:
        top = root / "unified" if (root / "unified" / "cgroup.controllers").exists() else root
        base = top / unified.lstrip("/")
        return Files(cpu=base / "cpu.stat", cpu_per_s=1e6, memory=base / "memory.current",
                     peak=base / "memory.peak", v2=True)
    return Files()


def cpu_value(text: str, v2: bool) -> int | None:
    """Pure: the cumulative CPU count in a cpuacct.usage or a cpu.stat."""
    if not v2:
        return _number(text)
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return _number(value)
    return None


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() and len(text) < 25 else None


class Cgroup:
    """The container's cgroup, read through `Files` each sample."""

    name = "container"

    def __init__(self, lines: Sequence[str], root: Path = ROOT) -> None:
        self.files = files_of(lines, root)
        if self.files.memory is None and self.files.cpu is None:
            raise ValueError("no cgroup v1 memory controller or v2 hierarchy for the container")

    def _read(self, path: Path | None) -> str | None:
        if path is None:
            return None
        try:
            return read_text_bounded(path, MAX_FILE, what="cgroup file")
        except InputError:
            return None

    def read(self) -> Figures:
        f = self.files
        cpu, memory, peak = self._read(f.cpu), self._read(f.memory), self._read(f.peak)
        if cpu is None and memory is None:
            raise Gone("the container's cgroup is gone")
        used = cpu_value(cpu, f.v2) if cpu is not None else None
        now = _number(memory) if memory is not None else None
        top = _number(peak) if peak is not None else None
        return {self.name: {
            q.CPU_S: None if used is None else round(used / f.cpu_per_s, 6),
            q.MEMORY_BYTES: None if now is None else float(now),
            q.MEMORY_PEAK_BYTES: None if top is None else float(top)}}

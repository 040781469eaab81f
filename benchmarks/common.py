"""What every benchmark shares: paths, a throwaway project, timing, alternation, RSS polling.

Ratios are taken inside one run with the two sides alternated pair by pair, so that the
load of this shared machine falls on both sides alike; absolute times are reported only
as context.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
BUILD = REPO / "images" / "rehearsal" / "build.py"
MB = 1 << 20
GB = 1 << 30


@dataclass
class Config:
    """One benchmark session: sizes depend on `quick`."""

    quick: bool
    work: Path
    image_id: str
    notes: list[str] = field(default_factory=list)

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def alternate(n: int, sides: list[Callable[[], float]]) -> list[list[float]]:
    """Run each side n times, rotating which goes first in each round; times per side."""
    out: list[list[float]] = [[] for _ in sides]
    for i in range(n):
        k = i % len(sides)
        for j in list(range(k, len(sides))) + list(range(k)):
            out[j].append(sides[j]())
    return out


def wall(argv: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of one command, with its output captured."""
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, **kw)
    return time.perf_counter() - t0, r


def mount_options(arg: str) -> dict[str, str]:
    """`type=bind,source=/a,target=/b,readonly` -> {"type": "bind", "source": "/a", ...}:
    the keyed options of one `docker run --mount` value (a bare flag has no key)."""
    return dict(p.split("=", 1) for p in arg.split(",") if "=" in p)


def check(r: subprocess.CompletedProcess, what: str) -> None:
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace") if isinstance(r.stderr, bytes) else r.stderr
        raise RuntimeError(f"{what} exited {r.returncode}: {(err or '')[-2000:]}")


def build_image() -> str:
    """The rehearsal image Id (built reproducibly from Debian packages, or found)."""
    r = subprocess.run([sys.executable, str(BUILD)], capture_output=True, text=True)
    check(r, "building the rehearsal image")
    return r.stdout.strip().splitlines()[-1]


def compile_harness() -> None:
    """Write the harness's bytecode caches first, as an installed harness has them: with
    PYTHONDONTWRITEBYTECODE set (as on the shared development machine) an editable install
    would otherwise compile every module from source at each start, and every start-up
    figure would measure the compiler."""
    r = subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "harness")],
                       capture_output=True, text=True)
    check(r, "compiling the harness's bytecode")


def parse_time(ts: str) -> float:
    """Epoch seconds of an RFC 3339 UTC time with up to nanoseconds (docker's or ours)."""
    base, _, frac = ts.rstrip("Z").partition(".")
    t = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def events(stderr: str) -> list[dict]:
    """The JSON-lines events a `harness run --json-lines` printed."""
    out = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


class Project:
    """A throwaway project folder shaped like the tests' one: campaigns/, controls/, lock."""

    def __init__(self, root: Path, image_id: str) -> None:
        self.root = root
        for d in ("campaigns", "controls", "locks"):
            (root / d).mkdir(parents=True, exist_ok=True)
        (root / "images.lock").write_text(
            f"images:\n  rehearsal:\n    id: {image_id}\n    ref: harness-rehearsal:local\n")
        self.runs = root / "runs"

    def control(self, name: str, body: str) -> Path:
        p = self.root / "controls" / f"{name}.yaml"
        p.write_text(f"name: {name}\nimage: rehearsal\ndevice: cpu\n" + textwrap.dedent(body))
        return p

    def campaign(self, name: str, controls: list[str]) -> Path:
        p = self.root / "campaigns" / f"{name}.yaml"
        p.write_text(f"name: {name}\nrow: BENCH\nlock: {self.root / 'locks' / 'gpu.lock'}\n"
                     f"lock_timeout: 120\nstop_policy: continue\n"
                     f"controls: {json.dumps(controls)}\n")
        return p

    def run_argv(self, campaign: Path) -> list[str]:
        return [sys.executable, "-m", "harness", "run", str(campaign), "--runs-dir",
                str(self.runs), "--json-lines"]

    def run_dirs(self) -> list[Path]:
        """The run folders (not perflog/ or nights/ beside them)."""
        if not self.runs.exists():
            return []
        return sorted(p for p in self.runs.iterdir() if (p / "run.json").is_file())


def rmtree(path: Path) -> None:
    """Remove a folder even where sealed run folders made it read-only."""

    def unlock(func, p, _exc):
        parent = os.path.dirname(p)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        if os.path.isdir(p) and not os.path.islink(p):
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        func(p)

    if path.exists():
        shutil.rmtree(path, onerror=unlock)


def fill(path: Path, size: int, block: bytes) -> None:
    """A file of `size` bytes made of `block` repeated, each copy tagged so blocks differ."""
    with open(path, "wb") as f:
        left, i = size, 0
        while left > 0:
            chunk = i.to_bytes(8, "little") + block[8:]
            f.write(chunk[:left])
            left -= len(chunk)
            i += 1


def sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)


class RssPoller(threading.Thread):
    """Memory of a process while it runs: its own RSS, and the PSS of it plus its Python
    children (post-steps). PSS splits shared pages, so a child between fork and exec,
    which shares all its parent's pages, is not counted twice."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.every = every
        self.samples: list[tuple[float, int, int]] = []  # (time, own rss, tree pss)
        self._halt = threading.Event()

    def _sample(self) -> tuple[float, int, int]:
        proc = psutil.Process(self.pid)
        rss = proc.memory_info().rss
        tree = proc.memory_full_info().pss
        for child in proc.children(recursive=True):
            try:
                if "python" in child.name():
                    tree += child.memory_full_info().pss
            except psutil.Error:
                continue
        return time.monotonic(), rss, tree

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.samples.append(self._sample())
            except psutil.Error:
                break
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def peak_mb(self, start: float = 0.0, end: float = 1.0, column: int = 1) -> float:
        """Peak in MiB over the fraction [start, end) of the samples; column 1 own RSS,
        2 tree PSS."""
        n = len(self.samples)
        part = self.samples[int(n * start): max(int(n * end), int(n * start) + 1)]
        return max((s[column] for s in part), default=0) / MB

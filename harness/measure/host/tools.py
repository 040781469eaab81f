"""Running the GPU tools (rocminfo, amd-smi): every failure becomes data, never an exception.

Below the doctor, so that sealing a run never depends on the doctor."""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.measure.host.parsers import (
    MAX_OUTPUT,
    ParseError,
    RocminfoReport,
    SmiGpu,
    parse_amd_smi_static,
    parse_rocminfo,
)

ROCM_BIN = "/opt/rocm/bin"
STDERR_KEPT = 4096  # bytes of a bounded run's stderr kept for its error message


@dataclass(frozen=True)
class ToolRun:
    """How running one tool went; `found` False means it is not on the search path."""

    tool: str
    found: bool
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # timeout or OS error, in words


@dataclass(frozen=True)
class GpuView:
    """What one tool says about the GPUs: (gfx target, name, VRAM bytes) per GPU."""

    source: str
    gpus: list[tuple[str | None, str | None, int | None]]


def default_search_path() -> str:
    """PATH, then /opt/rocm/bin: ROCm installs its tools there without touching PATH."""
    return os.pathsep.join(p for p in (os.environ.get("PATH", ""), ROCM_BIN) if p)


@dataclass(frozen=True)
class Bounded:
    """A bounded run: its exit status (None: stopped, at the deadline or past the output
    bound), its stdout, and the first STDERR_KEPT bytes of its stderr."""

    rc: int | None
    out: bytes
    err: bytes
    timed_out: bool = False

    def first_error(self) -> str | None:
        lines = self.err.decode("utf-8", "replace").strip().splitlines()
        return lines[0] if lines else None


def run_bounded(argv: list[str], *, timeout: float, limit: int,
                env: Mapping[str, str] | None = None) -> Bounded:
    """`argv` run with no shell, stdin closed, in its own session: stdout read to `limit`
    bytes and stderr apart, within `timeout` seconds; past either bound the whole session is
    killed, as is a tool still running (or a child holding its output) at the deadline.
    OSError when it cannot start."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout
    out, err, rc = bytearray(), bytearray(), None
    timed_out = over = False
    with proc, selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map() and not over:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                over = len(out) > limit
            del err[STDERR_KEPT:]
        if not (timed_out or over):
            try:
                rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if rc is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Bounded(rc, bytes(out[:limit]), bytes(err), timed_out)


def run_tool(argv: list[str], *, timeout: float = 20.0, search_path: str | None = None) -> ToolRun:
    """Run one read-only tool with a timeout; every way it can go wrong becomes a ToolRun."""
    tool = argv[0]
    exe = shutil.which(tool, path=search_path if search_path is not None else default_search_path())
    if exe is None:
        return ToolRun(tool=tool, found=False)
    try:
        ran = run_bounded([exe, *argv[1:]], timeout=timeout, limit=MAX_OUTPUT)
    except OSError as e:
        return ToolRun(tool=tool, found=True, error=f"could not start: {e.strerror or e}")
    if ran.rc is None:
        return ToolRun(tool=tool, found=True, error=f"timed out after {timeout:g}s"
                       if ran.timed_out else f"printed over {MAX_OUTPUT} bytes")
    return ToolRun(tool, True, ran.rc, ran.out.decode("utf-8", "replace"),
                   ran.err.decode("utf-8", "replace"))


def rocminfo(timeout: float = 20.0, search_path: str | None = None) -> ToolRun:
    return run_tool(["rocminfo"], timeout=timeout, search_path=search_path)


def amd_smi_static(timeout: float = 20.0, search_path: str | None = None) -> ToolRun:
    return run_tool(["amd-smi", "static", "--json"], timeout=timeout, search_path=search_path)


def tool_problem(run: ToolRun) -> str | None:
    """Why a tool run gives no output to read, in words; None when it ran fine."""
    if not run.found:
        return f"{run.tool} not found (not installed, or not on PATH nor in /opt/rocm/bin)"
    if run.error:
        return f"{run.tool} {run.error}"
    if run.returncode != 0:
        said = next((s.strip() for s in (run.stderr + "\n" + run.stdout).splitlines()
                     if s.strip()), "no output")
        return f"{run.tool} exited {run.returncode}: {said[:160]}"
    return None


def _read(run: ToolRun, parse: Callable[[str], Any]) -> tuple[Any, str | None]:
    problem = tool_problem(run)
    if problem:
        return None, problem
    try:
        return parse(run.stdout), None
    except ParseError as e:
        return None, f"{run.tool} output unreadable: {e}"


def read_rocminfo(run: ToolRun) -> tuple[GpuView | None, RocminfoReport | None, str | None]:
    report, problem = _read(run, parse_rocminfo)
    if report is None:
        return None, None, problem
    return GpuView("rocminfo", [(g.gfx_target, g.marketing_name, g.vram_bytes)
                                for g in report.gpus]), report, None


def read_amd_smi(run: ToolRun) -> tuple[GpuView | None, list[SmiGpu] | None, str | None]:
    gpus, problem = _read(run, parse_amd_smi_static)
    if gpus is None:
        return None, None, problem
    return GpuView("amd-smi", [(g.gfx_target, g.market_name, g.vram_bytes) for g in gpus]), \
        gpus, None

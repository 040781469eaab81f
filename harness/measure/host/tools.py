"""Running the GPU tools (rocminfo, amd-smi): every failure becomes data, never an exception.

Below the doctor, so that sealing a run never depends on the doctor."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.measure.host.parsers import (
    ParseError,
    RocminfoReport,
    SmiGpu,
    parse_amd_smi_static,
    parse_rocminfo,
)

ROCM_BIN = "/opt/rocm/bin"


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


def run_tool(argv: list[str], *, timeout: float = 20.0, search_path: str | None = None) -> ToolRun:
    """Run one read-only tool with a timeout; every way it can go wrong becomes a ToolRun."""
    tool = argv[0]
    exe = shutil.which(tool, path=search_path if search_path is not None else default_search_path())
    if exe is None:
        return ToolRun(tool=tool, found=False)
    try:
        proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, errors="replace", check=False)
    except subprocess.TimeoutExpired:
        return ToolRun(tool=tool, found=True, error=f"timed out after {timeout:g}s")
    except OSError as e:
        return ToolRun(tool=tool, found=True, error=f"could not start: {e.strerror or e}")
    return ToolRun(tool, True, proc.returncode, proc.stdout, proc.stderr)


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

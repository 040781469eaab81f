"""The `rocm` profile's telemetry: per-GPU figures from `amd-smi metric --json`, and the
kernel's amdgpu hwmon files where amd-smi says N/A.

The parser reads every shape published outputs show (tests/fixtures/amdsmi/SOURCES.md):
ROCm 6.0's bare numbers, 6.1-6.4's `{"value", "unit"}` and renamed fields, ROCm 7's
`{"gpu_data": [...]}`. A figure that is N/A, not a finite number in a known unit, or outside
what any GPU reports is None: never a guess, never a crash. A bare number is in the unit
amd-smi prints for it; its "MB" is MiB (amdsmi_cli/amdsmi_commands.py divides by 1024²).
amd-smi's GPU index is not the DRM card number, so sysfs cards are matched by PCI bus id
only; without a match the N/A figures stay N/A.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base import bounds
from harness.base.bounds import BadText
from harness.base.readfile import InputError, read_text_bounded
from harness.measure.host import tools
from harness.measure.host.tools import default_search_path
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry.sampler import Figures

MAX_TEXT = 4 * 1024 * 1024  # characters of one amd-smi output (eight MI300X: ~200 KB)
MAX_GPUS = 64
MAX_CARDS = 256  # entries of /sys/class/drm looked at
MAX_HWMON = 32
SYSFS_LIMIT = 4096  # a sysfs attribute is one page
STDERR_SHOWN = 400  # characters of the tool's stderr kept for an error message
GPU_QUANTITIES = (q.POWER_W, q.TEMPERATURE_C, q.HOTSPOT_C, q.GFX_CLOCK_MHZ,
                  q.MEMORY_CLOCK_MHZ, q.VRAM_USED_BYTES, q.VRAM_TOTAL_BYTES,
                  q.GFX_UTIL_PCT, q.MEMORY_UTIL_PCT)

_NA = {"", "N/A", "NA", "UNKNOWN", "NONE", "NOT SUPPORTED"}
_NUMBER_UNIT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-zµ°%/]{0,8})\s*")
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_CARD = re.compile(r"card[0-9]{1,4}")
_HWMON = re.compile(r"hwmon([0-9]{1,4})")


class AmdSmiError(RuntimeError):
    """amd-smi could not be run or its output read; `message` says why, in words."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AmdSmiNotFound(AmdSmiError):
    """The amd-smi executable is not on PATH nor in /opt/rocm/bin."""


# --------------------------------------------------------------------------- units


@dataclass(frozen=True)
class _Kind:
    """One kind of figure: default unit, each unit's factor, the range a real GPU reports."""

    default: str
    units: Mapping[str, float]
    low: float
    high: float


_MIB = 1024.0 * 1024.0
_POWER = _Kind("W", {"W": 1.0, "MW": 1e-3, "UW": 1e-6, "KW": 1e3}, 0.0, 5000.0)
_TEMP = _Kind("C", {"C": 1.0, "°C": 1.0}, -60.0, 200.0)
_CLOCK = _Kind("MHZ", {"MHZ": 1.0, "GHZ": 1e3, "KHZ": 1e-3, "HZ": 1e-6}, 0.0, 20000.0)
BYTES = _Kind("MB", {"B": 1.0, "KB": 1024.0, "MB": _MIB, "GB": _MIB * 1024,
                      "TB": _MIB * 1024 * 1024, "KIB": 1024.0, "MIB": _MIB,
                      "GIB": _MIB * 1024, "TIB": _MIB * 1024 * 1024}, 0.0, float(1 << 50))
_PCT = _Kind("%", {"%": 1.0}, 0.0, 100.0)


def amount(value: Any, kind: _Kind) -> float | None:
    """A bare number, `"10 W"` or `{"value": 10, "unit": "W"}` in `kind`'s base unit; None
    for anything else (N/A, booleans, NaN, unknown units, out of range)."""
    unit: Any = kind.default
    if isinstance(value, dict):
        unit = value.get("unit", kind.default)
        value = value.get("value")
    if isinstance(value, str) and value.strip().upper() not in _NA:
        match = _NUMBER_UNIT.fullmatch(value) if len(value) <= 40 else None
        if match is None:
            return None
        value, unit = float(match.group(1)), match.group(2) or unit
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(unit, str):
        return None
    factor = kind.units.get(unit.strip().replace("µ", "u").upper()) if len(unit) <= 8 else None
    if factor is None or not math.isfinite(value):
        return None
    return _scaled(float(value), factor, kind)


def _section(entry: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A section of one GPU's entry, empty when it is "N/A" or not an object."""
    section = entry.get(name)
    return section if isinstance(section, dict) else {}


def _first(section: Mapping[str, Any], keys: tuple[str, ...], kind: _Kind) -> float | None:
    """The first of `keys` that reads as a number: amd-smi renamed fields between releases,
    and some GPUs give one spelling as N/A (socket power: current on MI300, average MI200)."""
    return next((a for key in keys if (a := amount(section.get(key), kind)) is not None), None)


def _clock(clocks: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    """`{"gfx_0": {"clk": ...}}` since ROCm 6.1, `{"gfx": {"cur_clk": ...}}` in 6.0."""
    readings = (_first(d, ("clk", "cur_clk"), _CLOCK) for n in names
                if isinstance(d := clocks.get(n), dict))
    return next((r for r in readings if r is not None), None)


# --------------------------------------------------------------------------- parse


@dataclass(frozen=True)
class GpuEntry:
    """One GPU of an amd-smi output: amd-smi's index, its bus id if named, its figures."""

    index: int
    bdf: str | None
    figures: dict[str, float | None] = field(default_factory=dict)


def _entry_figures(entry: Mapping[str, Any]) -> dict[str, float | None]:
    power, temps = _section(entry, "power"), _section(entry, "temperature")
    usage, memory = _section(entry, "usage"), _section(entry, "mem_usage")
    clocks = _section(entry, "clock")
    return {
        q.POWER_W: _first(power, ("socket_power", "current_socket_power",
                                  "average_socket_power", "current_power"), _POWER),
        q.TEMPERATURE_C: _first(temps, ("edge",), _TEMP),
        q.HOTSPOT_C: _first(temps, ("hotspot", "junction"), _TEMP),
        q.GFX_CLOCK_MHZ: _clock(clocks, ("gfx_0", "gfx")),
        q.MEMORY_CLOCK_MHZ: _clock(clocks, ("mem_0", "mem")),
        q.VRAM_USED_BYTES: _first(memory, ("used_vram",), BYTES),
        q.VRAM_TOTAL_BYTES: _first(memory, ("total_vram",), BYTES),
        q.GFX_UTIL_PCT: _first(usage, ("gfx_activity", "gfx_usage"), _PCT),
        q.MEMORY_UTIL_PCT: _first(usage, ("umc_activity", "mem_usage"), _PCT),
    }


def _bdf(entry: Mapping[str, Any]) -> str | None:
    """The `0000:03:00.0` bus id an entry names (`bdf`, `gpu_bdf`, `bus.bdf`), or None."""
    for value in (entry.get("bdf"), entry.get("gpu_bdf"), _section(entry, "bus").get("bdf")):
        if isinstance(value, str) and len(value) <= 16 and _BDF.fullmatch(value.lower()):
            return value.lower()
    return None


def _json_constant(name: str) -> None:
    """NaN and Infinity are not JSON; amd-smi never prints them: the reading is unknown."""
    return None


def document(text: str) -> list[Any]:
    """The GPU entries of one output; AmdSmiError unless it is bounded amd-smi JSON."""
    if not isinstance(text, str):
        raise AmdSmiError(f"amd-smi output is not text but {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise AmdSmiError(f"amd-smi printed {len(text)} characters, over the "
                          f"{MAX_TEXT} character bound")
    try:
        data = json.loads(text, parse_int=bounds.json_int, parse_constant=_json_constant)
    except BadText as e:
        raise AmdSmiError(f"amd-smi output breaks a bound: {e.message}") from None
    except RecursionError:
        raise AmdSmiError("amd-smi output nests too deeply") from None
    except ValueError as e:
        first = text.strip().splitlines()[0][:120] if text.strip() else "empty output"
        raise AmdSmiError(f"amd-smi output is not JSON ({e.__class__.__name__}): "
                          f"{bounds.shown(first, 120)}") from None
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    elif isinstance(data, dict) and "gpu" in data:
        data = [data]
    if not isinstance(data, list):
        raise AmdSmiError("amd-smi JSON is neither a list of GPUs nor {\"gpu_data\": [...]}")
    return data


def gpu_entries(text: str) -> list[GpuEntry]:
    """Every GPU of an `amd-smi metric/list --json` output with a new whole `gpu` index, at
    most MAX_GPUS. AmdSmiError when the output is not JSON."""
    gpus: list[GpuEntry] = []
    seen: set[int] = set()
    for entry in document(text):
        if len(gpus) >= MAX_GPUS:
            break
        index = entry.get("gpu") if isinstance(entry, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 4096:
            continue
        if index in seen:
            continue
        seen.add(index)
        gpus.append(GpuEntry(index, _bdf(entry), _entry_figures(entry)))
    return gpus


def figures(text: str) -> Figures:
    """Pure: `{"gpu0": {quantity: value}, ...}` by amd-smi's index; AmdSmiError when the
    output cannot be read at all."""
    return {f"gpu{gpu.index}": dict(gpu.figures) for gpu in gpu_entries(text)}


# --------------------------------------------------------------------------- sysfs


def _sysfs_number(path: Path, *, signed: bool = False) -> float | None:
    """The whole number a sysfs attribute holds, or None (missing, EBUSY from a suspended
    card, a symlink, too long, not a number)."""
    text = sysfs_text(path) or ""
    negative = signed and text.startswith("-")
    try:
        value = bounds.parse_int(text[1:] if negative else text, "a sysfs value")
    except BadText:
        return None
    return float(-value if negative else value)


def sysfs_text(path: Path) -> str | None:
    """A kernel attribute (sysfs, procfs) as stripped text, or None when unreadable."""
    try:
        return read_text_bounded(path, SYSFS_LIMIT, "sysfs attribute").strip()
    except InputError:
        return None


def _scaled(value: float | None, factor: float, kind: _Kind) -> float | None:
    if value is None:
        return None
    amount = value * factor
    return amount if kind.low <= amount <= kind.high else None


def _hwmon_dir(device: Path) -> Path | None:
    """`device/hwmon/hwmonN` named `amdgpu`, else the lowest-numbered, or None."""
    try:
        with os.scandir(device / "hwmon") as it:
            found = sorted((int(m.group(1)), Path(e.path)) for e in itertools.islice(it, MAX_HWMON)
                           if (m := _HWMON.fullmatch(e.name)) and e.is_dir(follow_symlinks=False))
    except OSError:
        return None
    named = (path for _, path in found if sysfs_text(path / "name") == "amdgpu")
    return next(named, found[0][1] if found else None)


def hwmon(card_device_dir: Path) -> dict[str, float | None]:
    """The figures amdgpu's sysfs files give for `/sys/class/drm/cardN/device`, in the
    units of the kernel's Documentation/gpu/amdgpu/thermal.rst; None where unreadable."""
    device = Path(card_device_dir)
    mon = _hwmon_dir(device)

    def at(name: str, *, signed: bool = False) -> float | None:
        return None if mon is None else _sysfs_number(mon / name, signed=signed)

    power = at("power1_average")
    if power is None:
        power = at("power1_input")
    return {
        q.POWER_W: _scaled(power, 1e-6, _POWER),
        q.TEMPERATURE_C: _scaled(at("temp1_input", signed=True), 1e-3, _TEMP),
        q.HOTSPOT_C: _scaled(at("temp2_input", signed=True), 1e-3, _TEMP),
        q.GFX_CLOCK_MHZ: _scaled(at("freq1_input"), 1e-6, _CLOCK),
        q.MEMORY_CLOCK_MHZ: _scaled(at("freq2_input"), 1e-6, _CLOCK),
        q.VRAM_USED_BYTES: _scaled(_sysfs_number(device / "mem_info_vram_used"), 1.0, BYTES),
        q.VRAM_TOTAL_BYTES: _scaled(_sysfs_number(device / "mem_info_vram_total"), 1.0,
                                    BYTES),
        q.GFX_UTIL_PCT: _scaled(_sysfs_number(device / "gpu_busy_percent"), 1.0, _PCT),
        q.MEMORY_UTIL_PCT: _scaled(_sysfs_number(device / "mem_busy_percent"), 1.0, _PCT),
    }


def card_devices(sysfs: Path) -> dict[str, Path]:
    """`{PCI bus id: /sys/class/drm/cardN/device}`: the bus id ends the `device` link's
    target, read with readlink, never followed."""
    cards: dict[str, Path] = {}
    try:
        with os.scandir(sysfs) as it:
            names = [item.name for _, item in zip(range(MAX_CARDS), it, strict=False)]
    except OSError:
        return cards
    for name in sorted(names):
        if not _CARD.fullmatch(name):
            continue
        link = Path(sysfs) / name / "device"
        try:
            target = os.readlink(link)
        except OSError:
            continue
        bdf = os.path.basename(target.rstrip("/")).lower()
        if _BDF.fullmatch(bdf) and bdf not in cards:
            cards[bdf] = link
    return cards


# --------------------------------------------------------------------------- the tool


def resolve_command(command: tuple[str, ...]) -> list[str]:
    """The argv to run: a bare name looked up on PATH, then /opt/rocm/bin (where ROCm
    installs it without touching PATH); AmdSmiNotFound when it is not there."""
    if not command or not all(isinstance(a, str) for a in command):
        raise AmdSmiError("the amd-smi command is empty or not a list of strings")
    exe = command[0] if os.sep in command[0] else shutil.which(
        command[0], path=default_search_path())
    if exe is None or not os.path.isfile(exe):
        raise AmdSmiNotFound(f"{command[0]} not found (not installed, or not on PATH "
                             "nor in /opt/rocm/bin)")
    return [exe, *command[1:]]


def run_bounded(command: tuple[str, ...], timeout_s: float,
                limit: int = MAX_TEXT) -> str:
    """`command`'s stdout, at most `limit` bytes of UTF-8, within `timeout_s`
    (`tools.run_bounded`: stderr apart, so Python warnings some builds print never mix into
    the JSON). AmdSmiNotFound, or AmdSmiError saying how it failed."""
    argv = resolve_command(command)
    try:
        ran = tools.run_bounded(argv, timeout=timeout_s, limit=limit)
    except FileNotFoundError:
        raise AmdSmiNotFound(f"{argv[0]}: not found") from None
    except OSError as e:
        raise AmdSmiError(f"{argv[0]}: cannot start: {e.strerror or e}") from None
    if ran.timed_out:
        raise AmdSmiError(f"{argv[0]} took over {timeout_s:g}s and was stopped")
    if ran.rc is None:
        raise AmdSmiError(f"amd-smi printed over {limit} bytes")
    if ran.rc != 0:
        raise AmdSmiError(f"{argv[0]} exited {ran.rc}: "
                          f"{(ran.first_error() or 'no message')[:STDERR_SHOWN]}")
    try:
        return ran.out.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AmdSmiError(f"{argv[0]} printed bytes that are not UTF-8 "
                          f"({e.reason} at byte {e.start})") from None


class AmdSmi:
    """The `rocm` telemetry source: amd-smi's figures for the GPUs asked for (None: all),
    each N/A filled from the same card's hwmon files. Failures raise AmdSmiError, which
    the sampler records as a missed sample."""

    name = "amd-smi"

    def __init__(self, gpus: tuple[int, ...] | None, *,
                 command: tuple[str, ...] = ("amd-smi", "metric", "--json"),
                 timeout_s: float = 5.0, sysfs: Path = Path("/sys/class/drm"),
                 list_command: tuple[str, ...] | None = ("amd-smi", "list", "--json")) -> None:
        self.gpus = None if gpus is None else tuple(gpus)
        self.command = tuple(command)
        self.timeout_s = float(timeout_s)
        self.sysfs = Path(sysfs)
        self.list_command = None if list_command is None else tuple(list_command)
        self._bdfs: dict[int, str] | None = None  # amd-smi index -> bus id, asked once

    def read(self) -> Figures:
        """One sample: `{"gpu0": {...}, ...}` for the GPUs asked for that amd-smi lists."""
        started = time.monotonic()
        wanted = [g for g in gpu_entries(run_bounded(self.command, self.timeout_s))
                  if self.gpus is None or g.index in self.gpus]
        out: Figures = {}
        cards: dict[str, Path] | None = None  # looked up once a sample, when needed
        for gpu in wanted:
            own = dict(gpu.figures)
            bdf = gpu.bdf
            if None in own.values() and bdf is None:
                bdf = self._bus_ids(started).get(gpu.index)
            if None in own.values() and bdf is not None:
                cards = card_devices(self.sysfs) if cards is None else cards
                if bdf in cards:  # amd-smi's own readings win
                    kernel = hwmon(cards[bdf])
                    own = {k: v if v is not None else kernel.get(k) for k, v in own.items()}
            out[f"gpu{gpu.index}"] = own
        return out

    def _bus_ids(self, started: float) -> dict[int, str]:
        """amd-smi index -> bus id from `amd-smi list --json`, asked once (a failure is kept
        as no mapping rather than costing a failing run every sample)."""
        if self._bdfs is None:
            self._bdfs = {}
            left = self.timeout_s - (time.monotonic() - started)
            if self.list_command is not None and left > 0:
                try:
                    entries = gpu_entries(run_bounded(self.list_command, left))
                except AmdSmiError:
                    entries = []
                self._bdfs = {g.index: g.bdf for g in entries if g.bdf is not None}
        return self._bdfs

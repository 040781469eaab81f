"""The `rocm` profile's telemetry: per-GPU figures from `amd-smi metric --json`, and the
kernel's amdgpu hwmon files where amd-smi says N/A.

`amd-smi metric --json` has changed shape across ROCm releases, so the parser reads every
shape published outputs show (tests/fixtures/amdsmi/SOURCES.md):
- ROCm 6.0: a list of `{"gpu": N, ...}`, bare numbers (`"usage": {"gfx_usage": 3}`,
  `"power": {"current_power": 10}`, `"clock": {"gfx": {"cur_clk": 800}}`);
- ROCm 6.1 to 6.4: the same list, each number as `{"value": 10, "unit": "W"}`,
  `"gfx_activity"`, `"socket_power"`, `"clock": {"gfx_0": {"clk": ...}}`;
- ROCm 7: the list wrapped in `{"gpu_data": [...]}`.
A figure amd-smi reports as "N/A", or one that is not a plain finite number in a unit the
quantity can be converted from, or that is outside what any GPU reports, is None: never a
guess, never a crash. Units are converted only where a unit says so (`mW`, `GB`); a bare
number is in the unit amd-smi prints for it (W, °C, MHz, MB, %). amd-smi's "MB" is MiB:
its CLI divides bytes by 1024 * 1024 and calls that MB (amdsmi_cli/amdsmi_commands.py).

Which sysfs card is which amd-smi GPU: amd-smi's GPU index is its own, not the DRM card
number, so the two are matched by PCI bus id only (`amd-smi list --json` gives it, and a
metric entry that carries one), against the target of `/sys/class/drm/cardN/device`;
without a match the N/A figures stay N/A.

`figures` and `gpu_entries` are pure; `hwmon` reads a few sysfs files; `AmdSmi` runs the
tool (no shell, a timeout, its output bounded) and is the `Source` the sampler calls.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base import bounds
from harness.base.bounds import BadText
from harness.base.readfile import InputError, TooLarge, read_fd, read_text_bounded
from harness.measure.host.tools import default_search_path
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry.source import Figures

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
    """The amd-smi executable is not there (not installed, or not on PATH nor in
    /opt/rocm/bin)."""


# --------------------------------------------------------------------------- units


@dataclass(frozen=True)
class _Kind:
    """How one kind of figure is read: its default unit, the factor of each unit it may
    be given in, and the range a real GPU reports (outside it: None)."""

    default: str
    units: Mapping[str, float]
    low: float
    high: float


_MIB = 1024.0 * 1024.0
_POWER = _Kind("W", {"W": 1.0, "MW": 1e-3, "UW": 1e-6, "KW": 1e3}, 0.0, 5000.0)
_TEMP = _Kind("C", {"C": 1.0, "°C": 1.0}, -60.0, 200.0)
_CLOCK = _Kind("MHZ", {"MHZ": 1.0, "GHZ": 1e3, "KHZ": 1e-3, "HZ": 1e-6}, 0.0, 20000.0)
_BYTES = _Kind("MB", {"B": 1.0, "KB": 1024.0, "MB": _MIB, "GB": _MIB * 1024,
                      "TB": _MIB * 1024 * 1024, "KIB": 1024.0, "MIB": _MIB,
                      "GIB": _MIB * 1024, "TIB": _MIB * 1024 * 1024}, 0.0, float(1 << 50))
_PCT = _Kind("%", {"%": 1.0}, 0.0, 100.0)


def _na(value: Any) -> bool:
    return isinstance(value, str) and value.strip().upper() in _NA


def _amount(value: Any, kind: _Kind) -> float | None:
    """One amd-smi reading as a number in `kind`'s base unit, or None.

    A reading is a bare number, a `"10 W"` string, or `{"value": 10, "unit": "W"}`;
    "N/A", booleans, lists, NaN, infinities, unknown units and values outside the
    kind's range are None."""
    unit: Any = kind.default
    if isinstance(value, dict):
        unit = value.get("unit", kind.default)
        value = value.get("value")
    if isinstance(value, str) and not _na(value):
        match = _NUMBER_UNIT.fullmatch(value) if len(value) <= 40 else None
        if match is None:
            return None
        value, unit = float(match.group(1)), match.group(2) or unit
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(unit, str):
        return None
    factor = kind.units.get(unit.strip().replace("µ", "u").upper()) if len(unit) <= 8 else None
    if factor is None or not math.isfinite(value):
        return None
    amount = float(value) * factor
    return amount if kind.low <= amount <= kind.high else None


def _section(entry: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A section of one GPU's entry (`power`, `usage`, ...), empty when it is "N/A" or
    not an object."""
    section = entry.get(name)
    return section if isinstance(section, dict) else {}


def _first(section: Mapping[str, Any], keys: tuple[str, ...], kind: _Kind) -> float | None:
    """The first of `keys` in `section` whose reading is a number: amd-smi renamed its
    fields between releases, and some GPUs give one spelling as N/A and another as a
    reading (socket power on MI300 is current, on MI200 average)."""
    for key in keys:
        amount = _amount(section.get(key), kind)
        if amount is not None:
            return amount
    return None


def _clock(clocks: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    """A clock's current reading: `{"gfx_0": {"clk": ...}}` since ROCm 6.1,
    `{"gfx": {"cur_clk": ...}}` in 6.0."""
    for name in names:
        domain = clocks.get(name)
        if isinstance(domain, dict):
            amount = _first(domain, ("clk", "cur_clk"), _CLOCK)
            if amount is not None:
                return amount
    return None


# --------------------------------------------------------------------------- parse


@dataclass(frozen=True)
class GpuEntry:
    """One GPU of an amd-smi output: its index as amd-smi numbers it, its PCI bus id when
    the entry names one, and its figures (every GPU quantity, None where unknown)."""

    index: int
    bdf: str | None
    figures: dict[str, float | None] = field(default_factory=dict)


def _entry_figures(entry: Mapping[str, Any]) -> dict[str, float | None]:
    """The GPU quantities of one entry, each from the spellings amd-smi has used."""
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
        q.VRAM_USED_BYTES: _first(memory, ("used_vram",), _BYTES),
        q.VRAM_TOTAL_BYTES: _first(memory, ("total_vram",), _BYTES),
        q.GFX_UTIL_PCT: _first(usage, ("gfx_activity", "gfx_usage"), _PCT),
        q.MEMORY_UTIL_PCT: _first(usage, ("umc_activity", "mem_usage"), _PCT),
    }


def _bdf(entry: Mapping[str, Any]) -> str | None:
    """The PCI bus id an entry names (`bdf`, `gpu_bdf`, or `bus.bdf`), lower case, or
    None when it names none or not in the `0000:03:00.0` form."""
    for value in (entry.get("bdf"), entry.get("gpu_bdf"), _section(entry, "bus").get("bdf")):
        if isinstance(value, str) and len(value) <= 16 and _BDF.fullmatch(value.lower()):
            return value.lower()
    return None


def _json_int(text: str) -> int:
    """JSON integers with a bounded number of digits: Python's own guard raises a bare
    ValueError deep in the parser past 4300 digits."""
    negative = text.startswith("-")
    value = bounds.parse_int(text[1:] if negative else text, "a JSON integer")
    return -value if negative else value


def _json_constant(name: str) -> None:
    """NaN and Infinity are not JSON; amd-smi never prints them: the reading is unknown."""
    return None


def _document(text: str) -> list[Any]:
    """The list of GPU entries of one output; AmdSmiError when the text is not one
    bounded JSON document of a shape amd-smi prints."""
    if not isinstance(text, str):
        raise AmdSmiError(f"amd-smi output is not text but {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise AmdSmiError(f"amd-smi printed {len(text)} characters, over the "
                          f"{MAX_TEXT} character bound")
    try:
        data = json.loads(text, parse_int=_json_int, parse_constant=_json_constant)
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
    """Every GPU of an `amd-smi metric --json` (or `list --json`) output, in its order:
    entries that are not objects, have no whole-number `gpu` index, or repeat an index are
    left out, and at most MAX_GPUS are read. AmdSmiError when the output is not JSON."""
    gpus: list[GpuEntry] = []
    seen: set[int] = set()
    for entry in _document(text):
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


def source_name(index: int) -> str:
    """The telemetry source name of amd-smi's GPU `index`: `gpu0`, `gpu1`, ..."""
    return f"gpu{index}"


def figures(text: str) -> Figures:
    """`{"gpu0": {quantity: value}, ...}` of an `amd-smi metric --json` output, one source
    per GPU by amd-smi's index; None where amd-smi says N/A or gives no reading.
    Pure; AmdSmiError (a message in words) when the output cannot be read at all."""
    return {source_name(gpu.index): dict(gpu.figures) for gpu in gpu_entries(text)}


# --------------------------------------------------------------------------- sysfs


def _sysfs_number(path: Path, *, signed: bool = False) -> float | None:
    """The whole number one sysfs attribute holds (`"37000\\n"`), or None when the file
    is missing, unreadable (EBUSY from a runtime-suspended card), a symlink, too long,
    or not a number."""
    try:
        text = read_text_bounded(path, SYSFS_LIMIT, "sysfs attribute").strip()
    except InputError:
        return None
    negative = signed and text.startswith("-")
    try:
        value = bounds.parse_int(text[1:] if negative else text, "a sysfs value")
    except BadText:
        return None
    return float(-value if negative else value)


def _scaled(value: float | None, factor: float, kind: _Kind) -> float | None:
    if value is None:
        return None
    amount = value * factor
    return amount if kind.low <= amount <= kind.high else None


def _hwmon_dir(device: Path) -> Path | None:
    """The device's amdgpu hwmon folder (`device/hwmon/hwmonN`, the one whose `name` is
    `amdgpu`, else the lowest-numbered), or None when it has none."""
    try:
        with os.scandir(device / "hwmon") as it:
            found = []
            for i, item in enumerate(it):
                if i >= MAX_HWMON:
                    break
                match = _HWMON.fullmatch(item.name)
                if match and item.is_dir(follow_symlinks=False):
                    found.append((int(match.group(1)), Path(item.path)))
    except OSError:
        return None
    found.sort()
    for _, path in found:
        try:
            if read_text_bounded(path / "name", SYSFS_LIMIT, "hwmon name").strip() == "amdgpu":
                return path
        except InputError:
            continue
    return found[0][1] if found else None


def hwmon(card_device_dir: Path) -> dict[str, float | None]:
    """The figures the amdgpu driver's sysfs files give for one card
    (`/sys/class/drm/cardN/device`), for where amd-smi says N/A: power1_average (else
    power1_input) in microwatts, temp1_input (edge) and temp2_input (junction) in
    millidegrees, freq1_input (gfx) and freq2_input (memory) in hertz, the device's
    mem_info_vram_used / mem_info_vram_total in bytes, gpu_busy_percent and
    mem_busy_percent (the kernel's Documentation/gpu/amdgpu/thermal.rst). None for each
    file that is missing or unreadable."""
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
        q.VRAM_USED_BYTES: _scaled(_sysfs_number(device / "mem_info_vram_used"), 1.0, _BYTES),
        q.VRAM_TOTAL_BYTES: _scaled(_sysfs_number(device / "mem_info_vram_total"), 1.0,
                                    _BYTES),
        q.GFX_UTIL_PCT: _scaled(_sysfs_number(device / "gpu_busy_percent"), 1.0, _PCT),
        q.MEMORY_UTIL_PCT: _scaled(_sysfs_number(device / "mem_busy_percent"), 1.0, _PCT),
    }


def card_devices(sysfs: Path) -> dict[str, Path]:
    """`{PCI bus id: /sys/class/drm/cardN/device}` of every DRM card: the bus id is the
    last part of the `device` link's target (`../../../0000:03:00.0`), read with
    readlink, never followed. At most MAX_CARDS entries are looked at."""
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


def filled(own: Mapping[str, float | None],
           kernel: Mapping[str, float | None]) -> dict[str, float | None]:
    """amd-smi's figures with each None replaced by the kernel's figure, where it has one:
    amd-smi's own readings always win."""
    return {name: value if value is not None else kernel.get(name)
            for name, value in own.items()}


# --------------------------------------------------------------------------- the tool


def resolve_command(command: tuple[str, ...]) -> list[str]:
    """The argv to run: a bare tool name is looked up on PATH, then /opt/rocm/bin (where
    ROCm installs it without touching PATH); AmdSmiNotFound when it is not there."""
    if not command or not all(isinstance(a, str) for a in command):
        raise AmdSmiError("the amd-smi command is empty or not a list of strings")
    exe = command[0] if os.sep in command[0] else shutil.which(
        command[0], path=default_search_path())
    if exe is None or not os.path.isfile(exe):
        raise AmdSmiNotFound(f"{command[0]} not found (not installed, or not on PATH "
                             "nor in /opt/rocm/bin)")
    return [exe, *command[1:]]


def _kill(proc: subprocess.Popen, fired: threading.Event) -> None:
    """Stop the tool and every process it started (its own session)."""
    fired.set()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _first_line(err: Any) -> str:
    """The first line of the tool's stderr (a temporary file), shortened, for a message."""
    raw = os.pread(err.fileno(), STDERR_SHOWN, 0)
    lines = raw.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else "no message"


def run_bounded(command: tuple[str, ...], timeout_s: float,
                limit: int = MAX_TEXT) -> str:
    """What `command` prints on stdout, at most `limit` bytes of UTF-8, within
    `timeout_s`: no shell, stdin closed, stderr kept apart (Python warnings some builds
    print there never mix into the JSON), the tool and its children killed at the
    deadline. AmdSmiNotFound, or AmdSmiError saying how it failed."""
    argv = resolve_command(command)
    fired = threading.Event()
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err, start_new_session=True)
        except FileNotFoundError:
            raise AmdSmiNotFound(f"{argv[0]}: not found") from None
        except OSError as e:
            raise AmdSmiError(f"{argv[0]}: cannot start: {e.strerror or e}") from None
        out, rc = _finish(proc, time.monotonic() + timeout_s, limit, fired)
        if fired.is_set():
            raise AmdSmiError(f"{argv[0]} took over {timeout_s:g}s and was stopped")
        if rc != 0:
            raise AmdSmiError(f"{argv[0]} exited {rc}: {_first_line(err)}")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AmdSmiError(f"{argv[0]} printed bytes that are not UTF-8 "
                          f"({e.reason} at byte {e.start})") from None


def _finish(proc: subprocess.Popen, deadline: float, limit: int,
            fired: threading.Event) -> tuple[bytes, int | None]:
    """Read the started tool's output and wait for it, a timer killing it at `deadline`
    (a tool that hangs with its output open, or after closing it): (stdout, exit
    status); `fired` is set when the deadline stopped it."""
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), _kill, (proc, fired))
    timer.start()
    try:
        with proc:
            out = _read_out(proc, limit, fired)
            try:
                rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(proc, fired)
                rc = proc.wait()
    finally:
        timer.cancel()
    return out, rc


def _read_out(proc: subprocess.Popen, limit: int, fired: threading.Event) -> bytes:
    """The tool's stdout to its end, at most `limit` bytes (the one bounded read loop);
    past it the tool is stopped and the output refused."""
    try:
        return read_fd(proc.stdout.fileno(), limit)
    except TooLarge:
        _kill(proc, threading.Event())
        raise AmdSmiError(f"amd-smi printed over {limit} bytes") from None
    except OSError as e:
        if fired.is_set():
            return b""
        raise AmdSmiError(f"cannot read amd-smi's output: {e.strerror or e}") from None


class AmdSmi:
    """The `rocm` profile's telemetry source: `read()` runs `amd-smi metric --json`,
    keeps the GPUs asked for (all when `gpus` is None), and fills each figure amd-smi
    gives as N/A from the kernel's hwmon files of the same card, found by PCI bus id.
    A missing amd-smi raises AmdSmiNotFound; any other failure AmdSmiError (the sampler
    records either as a missed sample)."""

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
                if bdf in cards:
                    own = filled(own, hwmon(cards[bdf]))
            out[source_name(gpu.index)] = own
        return out

    def _bus_ids(self, started: float) -> dict[int, str]:
        """amd-smi's GPU index -> PCI bus id from `amd-smi list --json`, asked the first
        time a figure is N/A and kept (a failed answer is kept as no mapping: the figures
        stay N/A rather than costing a failing run every sample)."""
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

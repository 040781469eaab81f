"""Pure parsers of what ROCm's tools print: `rocminfo` and `amd-smi static --json`.

Tested on real captures (tests/fixtures/rocm/). The output is hostile: past a bound it is
a ParseError, a number past one leaves its field None; nothing else is raised."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from harness.base import bounds
from harness.base.bounds import BadText

MAX_OUTPUT = 16 * 1024 * 1024  # characters of one tool's output
MAX_LINE = 16 * 1024  # rocminfo's lines are short; a longer one makes its patterns slow
MAX_JSON_TRIES = 8  # lines that open a JSON document after noise, tried in turn
MAX_VRAM = 1 << 60  # bytes: a larger size is not a GPU's
_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_NA = {"", "N/A", "NA", "UNKNOWN", "NONE"}


class ParseError(ValueError):
    """The text is not the tool output we expect; the message says what is wrong."""


def _bounded_lines(text: str, what: str, max_len: int = MAX_LINE) -> list[str]:
    """The output's lines, each within `max_len` and the whole within MAX_OUTPUT."""
    try:
        bounds.short(text, f"{what} output", MAX_OUTPUT)
        return [line for _, line in bounds.lines(text, what, max_len=max_len, controls=True)]
    except BadText as e:
        raise ParseError(e.message) from None


def _number(text: str | None, what: str) -> int | None:
    """A whole number of ASCII digits within the shared bound, or None (unknown)."""
    try:
        return bounds.parse_int(text or "", what)
    except BadText:
        return None


def base_gfx(target: str | None) -> str | None:
    """`gfx942:sramecc+:xnack-` -> `gfx942`; comparisons of targets ignore feature flags."""
    if not target:
        return None
    head = target.strip().lower().split(":", 1)[0]
    head = head.removeprefix("amdgcn-amd-amdhsa--")
    return head if re.fullmatch(r"gfx[0-9a-z]+(-[0-9a-z]+)*", head) else None


def gib(nbytes: int | None) -> str:
    """Human VRAM size for one-line details."""
    return "unknown VRAM" if nbytes is None else f"{nbytes / 1024**3:.1f} GiB"


@dataclass(frozen=True)
class RocmAgent:
    """One GPU agent from `rocminfo`."""

    gfx_target: str | None
    marketing_name: str | None
    uuid: str | None
    vram_bytes: int | None
    compute_units: int | None
    chip_id: str | None
    node: int | None
    isa: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RocminfoReport:
    runtime_version: str | None
    kernel_module: str | None  # "loaded" or the ROCk module version when it prints one
    gpus: list[RocmAgent]


_AGENT = re.compile(r"^\s*Agent\s+\d+\s*$")
_POOL = re.compile(r"^\s*Pool\s+\d+\s*$")
_ISA = re.compile(r"^\s*ISA\s+\d+\s*$")
_SIZE = re.compile(r"^\s*([0-9]+)\s*(?:\([^)]*\))?\s*([KMGT]?B)\s*$", re.IGNORECASE)
_AGENT_KEYS = {"Name", "Uuid", "Marketing Name", "Device Type", "Compute Unit", "Chip ID", "Node"}


def _kv(line: str) -> tuple[str, str] | None:
    """`  Key:   value  ` -> (Key, value) or None; linear (a lazy pattern was quadratic)."""
    key, sep, value = line.partition(":")
    return (key.strip(), value.strip()) if sep and key else None


def _vram(nbytes: float) -> int | None:
    return int(nbytes) if 0 <= nbytes <= MAX_VRAM else None


def _int_head(text: str | None) -> int | None:
    m = re.match(r"\s*([0-9]+)", text or "")
    return _number(m.group(1), "a count") if m else None


def _agent_blocks(lines: list[str]) -> list[list[str]]:
    """Split the text at each `Agent N` banner; indentation is not trusted (tabs occur)."""
    blocks: list[list[str]] = []
    for line in lines:
        if _AGENT.match(line):
            blocks.append([])
        elif blocks and not line.strip().startswith("***"):
            blocks[-1].append(line)
    return blocks


def _parse_agent(block: list[str]) -> dict[str, Any]:
    top: dict[str, str] = {}
    pools: list[dict[str, str]] = []
    isa: list[str] = []
    section = "agent"
    for line in block:
        if line.strip() == "Pool Info:":
            section = "pool"
            continue
        if line.strip() == "ISA Info:":
            section = "isa"
            continue
        if section == "pool" and _POOL.match(line):
            pools.append({})
            continue
        if section == "isa" and _ISA.match(line):
            continue
        kv = _kv(line)
        if kv is None:
            continue
        key, value = kv
        if section == "agent" and key in _AGENT_KEYS:
            top.setdefault(key, value)
        elif section == "pool" and pools and key in ("Segment", "Size"):
            pools[-1].setdefault(key, value)
        elif section == "isa" and key == "Name":
            isa.append(value)
    return {"top": top, "pools": pools, "isa": isa}


def _vram_from_pools(pools: list[dict[str, str]]) -> int | None:
    """The device-local pool is the GLOBAL COARSE GRAINED one; its size is the VRAM."""
    for pool in pools:
        seg = pool.get("Segment", "").upper()
        if seg.startswith("GLOBAL") and "COARSE GRAINED" in seg:
            m = _SIZE.match(pool.get("Size", ""))
            n = _number(m.group(1), "a size") if m else None
            return None if n is None else _vram(n * _UNITS[m.group(2).upper()])
    return None


def parse_rocminfo(text: str) -> RocminfoReport:
    """Parse `rocminfo` text; ParseError without an HSA agent list or past a bound."""
    lines = _bounded_lines(text, "rocminfo")
    if not any("HSA Agents" in line for line in lines):
        first = next((s.strip() for s in lines if s.strip()), "empty output")
        raise ParseError(f"not rocminfo output (no 'HSA Agents' section): {first[:120]}")
    runtime = None
    module = None
    for line in lines:
        kv = _kv(line)
        if kv and kv[0] == "Runtime Version" and runtime is None:
            runtime = kv[1]
        mod = re.match(r"^\s*ROCk module (?:version (\S+) )?is loaded", line)
        if mod and module is None:
            module = mod.group(1) or "loaded"
    gpus = []
    for block in _agent_blocks(lines):
        agent = _parse_agent(block)
        top = agent["top"]
        if top.get("Device Type", "").upper() != "GPU":
            continue
        isa = agent["isa"]
        target = base_gfx(top.get("Name")) or next(filter(None, map(base_gfx, isa)), None)
        chip = top.get("Chip ID")
        hex_chip = re.search(r"\((0x[0-9a-fA-F]+)\)", chip or "")
        gpus.append(RocmAgent(
            gfx_target=target, marketing_name=top.get("Marketing Name") or None,
            uuid=top.get("Uuid") or None, vram_bytes=_vram_from_pools(agent["pools"]),
            compute_units=_int_head(top.get("Compute Unit")),
            chip_id=hex_chip.group(1).lower() if hex_chip else chip,
            node=_int_head(top.get("Node")), isa=isa))
    return RocminfoReport(runtime_version=runtime, kernel_module=module, gpus=gpus)


@dataclass(frozen=True)
class SmiGpu:
    """One GPU from `amd-smi static --json`: the fields that identify the host's hardware."""

    index: int | None
    market_name: str | None
    gfx_target: str | None
    device_id: str | None
    bdf: str | None
    vram_bytes: int | None
    vram_type: str | None
    driver_name: str | None
    driver_version: str | None
    vbios_version: str | None
    vbios_part_number: str | None
    board_product_name: str | None


def _clean(value: Any) -> Any:
    """amd-smi writes "N/A" for what it cannot read; treat that as absent."""
    if isinstance(value, str) and value.strip().upper() in _NA:
        return None
    return value


def _pick(d: Any, *keys: str) -> Any:
    if not isinstance(d, dict):
        return None
    for key in keys:
        value = _clean(d.get(key))
        if value is not None:
            return value
    return None


def _amount_bytes(value: Any, default_unit: str = "MB") -> int | None:
    """amd-smi VRAM sizes: {"value": 65520, "unit": "MB"}, "65520 MB" or a number; binary units."""
    unit = default_unit
    if isinstance(value, dict):
        unit = str(value.get("unit") or default_unit)
        value = _clean(value.get("value"))
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?i?B)?\s*", value) if len(value) < 64 else None
        if m is None:
            return None
        value = _decimal(m.group(1))
        unit = (m.group(2) or unit).replace("i", "")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    factor = _UNITS.get(unit.upper().replace("I", ""))
    return None if factor is None or not 0 <= value <= MAX_VRAM else _vram(value * factor)


def _decimal(text: str) -> float | None:
    try:
        return bounds.parse_decimal(text, "a size")
    except BadText:
        return None


def _json(text: str) -> Any:
    """One JSON document, integers bounded; ParseError past a bound."""
    try:
        return json.loads(text, parse_int=bounds.json_int)
    except BadText as e:
        raise ParseError(f"the JSON breaks a bound: {e.message}") from None
    except RecursionError:
        raise ParseError("the JSON breaks a bound: it nests too deeply") from None


def _json_payload(text: str) -> Any:
    """Parse JSON, skipping noise some amd-smi builds print before it (Python warnings)."""
    lines = _bounded_lines(text, "tool", max_len=MAX_OUTPUT)
    try:
        return _json(text)
    except json.JSONDecodeError:
        pass
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(("{", "["))]
    for i in starts[:MAX_JSON_TRIES]:
        try:
            return _json("\n".join(lines[i:]))
        except json.JSONDecodeError:
            continue
    first = next((s.strip() for s in lines if s.strip()), "empty output")
    raise ParseError(f"no JSON document in the output: {first[:120]}")


def parse_amd_smi_static(text: str) -> list[SmiGpu]:
    """Parse `amd-smi static --json`: newer builds wrap the list in {"gpu_data": [...]}."""
    data = _json_payload(text)
    if isinstance(data, dict) and "gpu_data" in data:
        data = data["gpu_data"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise ParseError("amd-smi static JSON is neither a GPU list nor {'gpu_data': [...]}")
    gpus = []
    for i, entry in enumerate(data):
        asic, bus, vram = entry.get("asic"), entry.get("bus"), entry.get("vram")
        vbios = entry.get("vbios") if isinstance(entry.get("vbios"), dict) else entry.get("ifwi")
        driver = entry.get("driver")
        index = entry.get("gpu")
        size = _pick(vram, "size", "vram_size") if isinstance(vram, dict) else None
        if size is None and isinstance(vram, dict) and _clean(vram.get("vram_size_mb")):
            size = vram["vram_size_mb"]
        gpus.append(SmiGpu(
            index=index if isinstance(index, int) else i,
            market_name=_pick(asic, "market_name"),
            gfx_target=base_gfx(_pick(asic, "target_graphics_version")),
            device_id=_pick(asic, "device_id"), bdf=_pick(bus, "bdf") or _pick(asic, "pci_bdf"),
            vram_bytes=_amount_bytes(size) if size is not None else None,
            vram_type=_pick(vram, "type", "vram_type"),
            driver_name=_pick(driver, "name", "driver_name"),
            driver_version=_pick(driver, "version", "driver_version"),
            vbios_version=_pick(vbios, "version", "vbios_version"),
            vbios_part_number=_pick(vbios, "part_number", "vbios_part_number"),
            board_product_name=_pick(entry.get("board"), "product_name")))
    return gpus


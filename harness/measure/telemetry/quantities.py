"""The quantities a telemetry source may report, each with its unit in its name, spelled once."""

from __future__ import annotations

import math

CPU_S = "cpu_s"  # CPU time used so far (cumulative), seconds
MEMORY_BYTES = "memory_bytes"  # memory in use now
MEMORY_PEAK_BYTES = "memory_peak_bytes"  # the most in use so far
POWER_W = "power_w"  # average socket power, watts
TEMPERATURE_C = "temperature_c"  # edge temperature, degrees Celsius
HOTSPOT_C = "hotspot_c"  # junction (hotspot) temperature, degrees Celsius
GFX_CLOCK_MHZ = "gfx_clock_mhz"
MEMORY_CLOCK_MHZ = "memory_clock_mhz"
VRAM_USED_BYTES = "vram_used_bytes"
VRAM_TOTAL_BYTES = "vram_total_bytes"
GFX_UTIL_PCT = "gfx_util_pct"  # graphics engine activity, percent
MEMORY_UTIL_PCT = "memory_util_pct"  # memory controller activity, percent

UNITS: dict[str, str] = {
    CPU_S: "s", MEMORY_BYTES: "B", MEMORY_PEAK_BYTES: "B", POWER_W: "W",
    TEMPERATURE_C: "°C", HOTSPOT_C: "°C", GFX_CLOCK_MHZ: "MHz", MEMORY_CLOCK_MHZ: "MHz",
    VRAM_USED_BYTES: "B", VRAM_TOTAL_BYTES: "B", GFX_UTIL_PCT: "%", MEMORY_UTIL_PCT: "%",
}
QUANTITIES = frozenset(UNITS)
CUMULATIVE = frozenset({CPU_S})  # a running total: its mean over samples means nothing


def number(value: object) -> bool:
    """A finite int or float (not a bool) that a float holds: the one test the sampler and
    its readers use. A workload writes its telemetry: an int of 400 digits is not a
    figure (isfinite would raise OverflowError on it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False

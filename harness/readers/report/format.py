"""Short human forms of the report's figures: a metric with its unit, a duration."""

from __future__ import annotations

import math

from harness.measure import perflog
from harness.readers.report.runline import seconds_text

MIB = 1 << 20


def _finite(v: float | int | None) -> bool:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an int too large for a float is not a plottable figure
        return False


def fmt(value: float | int | None, unit: str = "") -> str:
    """A short human form of a metric value: 3 significant decimals at most."""
    if not _finite(value):  # None, NaN, Infinity, a non-number: never shown as a figure
        return "—"
    if isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    elif abs(value) >= 100:
        text = f"{value:,.1f}"
    else:
        text = f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return f"{text} {unit}".strip() if unit and unit != "x" else f"{text}{unit}"


def figure_text(name: str, value: float | int | None) -> str:
    """A figure in its own form: seconds as durations, an exit code bare, the rest with units."""
    if name in ("duration_s", "lock_wait_s", "lock_hold_s"):
        return seconds_text(value if _finite(value) else None)
    if name == "exit_code":
        return str(value) if _finite(value) else "—"
    if perflog.unit(name) == "B":  # bytes read best as MiB (the perf log keeps bytes)
        return fmt(value / MIB if _finite(value) else None, "MiB")
    return fmt(value, perflog.unit(name))

"""UTC time stamps in the one format evidence uses, so readers compare and sort them as
text; parse() also reads the older forms sealed folders may hold.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from typing import Any

# utc_now()'s form, and the older forms sealed folders may hold: whole seconds
# (2026-11-30T08:30:00Z) and datetime.isoformat() with an offset (…+00:00).
_READABLE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_LENIENT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?")


def iso(at: datetime) -> str:
    """`at` in the evidence format, converted to UTC; a naive `at` has no meaning, so raises."""
    if at.tzinfo is None:
        raise ValueError("a time stamp needs a time zone: naive datetimes are ambiguous")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_now() -> str:
    """ISO-8601 UTC with microseconds and a Z, e.g. 2026-11-30T08:30:00.123456Z."""
    return iso(datetime.now(UTC))


def unix_now() -> float:
    """The wall clock in seconds since the epoch, to the millisecond: how a telemetry
    sample is placed against the instrument's observations (which carry time.time())."""
    return round(time.time(), 3)


def stamp(at: datetime | None = None) -> str:
    """Compact UTC stamp for names: 20261130T083000Z (now, or `at` in any time zone)."""
    return (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def parse(ts: str) -> datetime:
    """A stamp written by utc_now() (or an older form, see _READABLE) as an aware UTC time."""
    if not isinstance(ts, str) or not _READABLE.fullmatch(ts):
        raise ValueError(f"not an evidence time stamp: {ts!r}")
    return datetime.fromisoformat(ts).astimezone(UTC)


def parse_or_none(value: object) -> datetime | None:
    """A time read from evidence that may be absent or malformed (a hostile, hand-edited or
    foreign record), as an aware UTC time, or None. A naive time is read as UTC (the harness
    writes only UTC), so durations from such a record still subtract instead of raising."""
    if not isinstance(value, str) or not _LENIENT.fullmatch(value):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:  # the shape matched, the date does not exist (month 13)
        return None
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).astimezone(UTC)


_DURATION = re.compile(r"^\s*([0-9]{1,12}(?:\.[0-9]{1,12})?)\s*(s|sec|m|min|h|d)?\s*$")
_UNITS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
MAX_DURATION = 30 * 86400.0  # a bound, not a wish: NaN, inf or 1e308 would switch it off


def parse_duration(value: Any) -> float:
    """`90`, `90s`, `30m`, `2h` -> seconds, finite, positive and at most 30 days: NaN or inf
    would silently disable the bound that releases the GPU."""
    if isinstance(value, bool):
        raise ValueError("a duration, not a boolean")
    try:
        if isinstance(value, int | float):
            seconds = float(value)
        elif isinstance(value, str) and (m := _DURATION.match(value)):
            seconds = float(m.group(1)) * _UNITS[m.group(2)]
        else:
            raise ValueError(f"not a duration: {str(value)[:40]!r} (use e.g. 90, 90s, 30m, 2h)")
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise ValueError("a duration must be a finite number of seconds "
                         "(not NaN, not infinity)")
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    if seconds > MAX_DURATION:
        raise ValueError(f"a duration must be at most 30 days ({MAX_DURATION:.0f} s), "
                         f"not {seconds:g} s")
    return seconds

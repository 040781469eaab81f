"""Command-line numbers that are bounds: parsed once, finite, positive and capped.

click's `float` accepts `nan`, `inf` and `1e308`; as a lock wait or a deadline each of those
means "never", which is exactly what a bound must not mean. Durations on the command line go
through the same `parse_duration` as durations in YAML, so `--lock-timeout 2h` works and
`--lock-timeout nan` is a usage error (exit 2)."""

from __future__ import annotations

import math
from typing import Any

import click

from harness.config.schema import parse_duration

MAX_HOURS = 30 * 24.0


def parse_hours(value: Any) -> float:
    """A number of hours: finite, positive, at most 30 days. Pure; ValueError otherwise."""
    try:
        hours = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{str(value)[:40]!r} is not a number of hours") from None
    if not math.isfinite(hours):
        raise ValueError("must be a finite number of hours (not NaN, not infinity)")
    if hours <= 0:
        raise ValueError(f"{hours:g}: must be positive")
    if hours > MAX_HOURS:
        raise ValueError(f"{hours:g}: at most {MAX_HOURS:g} hours (30 days)")
    return hours


class _Bounded(click.ParamType):
    def __init__(self, name: str, parse: Any) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            return self._parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


DURATION = _Bounded("duration", parse_duration)
HOURS = _Bounded("hours", parse_hours)

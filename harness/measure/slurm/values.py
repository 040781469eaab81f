"""The values a Slurm job is built from, each checked before it is used. Pure.

The argv and script are built from campaign names, site paths and journal numbers, any
of which may be hostile; a value that fails is InvalidInput, and the job is never submitted."""

from __future__ import annotations

import math
import re

from harness.base.errors import InvalidInput
from harness.base.names import SAFE_NAME_MAX, is_name, pattern

MAX_PATH = 1024
MAX_TIME_S = 30 * 24 * 3600  # no single attempt may ask for more than 30 days
# A night's id (`<campaign>-<UTC stamp>`) and a run id in a job: at most 100 characters,
# so the job name that carries a night stays within Slurm's columns (job.TOKEN_MAX).
ID_MAX = 100
_TEXT_MAX = 100  # any name or pattern-checked value
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def has_control(value: str) -> bool:
    """Whether `value` holds a control character or a line break of any script."""
    return _UNSAFE.search(value) is not None


def text(label: str, value: object, limit: int) -> str:
    """1..`limit` characters of text without a control character."""
    if not isinstance(value, str):
        raise InvalidInput(f"slurm job: {label} must be text, not {type(value).__name__}")
    if not value or len(value) > limit:
        raise InvalidInput(f"slurm job: {label} must be 1..{limit} characters, "
                           f"not {len(value)}")
    if has_control(value):
        raise InvalidInput(f"slurm job: {label} contains a control character: {value!r}")
    return value


def name(label: str, value: object, longest: int = SAFE_NAME_MAX) -> str:
    """A name of the one alphabet, at most `longest` characters."""
    checked = text(label, value, _TEXT_MAX)
    if not is_name(checked, longest):
        raise InvalidInput(f"slurm job: {label} {checked!r} must match {pattern(longest)}")
    return checked


def matching(label: str, value: object, shape: re.Pattern[str]) -> str:
    """Text that matches `shape` as a whole (a value of its own grammar: a gfx target)."""
    checked = text(label, value, _TEXT_MAX)
    if not shape.fullmatch(checked):
        raise InvalidInput(f"slurm job: {label} {checked!r} must match {shape.pattern}")
    return checked


def path(label: str, value: object, *, relative_ok: bool = False) -> str:
    """A bounded path, never through `..`, absolute unless `relative_ok`, and never one
    that starts with `-` (an argument of the job's commands would read it as an option)."""
    checked = text(label, value, MAX_PATH)
    if not relative_ok and not checked.startswith("/"):
        raise InvalidInput(f"slurm job: {label} must be an absolute path: {checked!r}")
    if checked.startswith("-"):
        raise InvalidInput(f"slurm job: {label} must not start with '-': {checked!r}")
    if ".." in checked.split("/"):
        raise InvalidInput(f"slurm job: {label} must not contain '..': {checked!r}")
    return checked


def count(label: str, value: object, low: int, high: int) -> int:
    """A whole number from `low` to `high` (never a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"slurm job: {label} must be an integer {low}..{high}: {value!r}")
    return value


def seconds(label: str, value: object) -> float:
    """A finite number of seconds from 0 to MAX_TIME_S."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not 0 <= value <= MAX_TIME_S:
        raise InvalidInput(f"slurm job: {label} must be 0..{MAX_TIME_S} seconds: {value!r}")
    return float(value)

"""The bounds every parser of outside text shares: numbers, ranges, lines and fields.

Python's own parsing is not bounded the way a parser of hostile text needs (`int()` of
5000 digits raises deep inside, accepts `+1`, `1_0` and other scripts' digits; a range
expanded into a list costs gigabytes), so each bound is named here once and every way
past one is the same `BadText` (a ValueError) saying which bound broke. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_DIGITS = 18  # below 2**63: every id, index, count and size read here fits
MAX_ELEMENTS = 4096  # what one range list may stand for, unless its parser says otherwise
MAX_LINE = 64 * 1024  # characters in one line
MAX_LINES = 500_000
MAX_FIELDS = 256  # fields in one line
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: no sign, space, `_` or other scripts' digits
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # a tab is text; NUL, ESC, CR are not


class BadText(ValueError):
    """Outside text past a bound or outside its grammar; `message` says which."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def shown(text: str, limit: int = 40) -> str:
    """`text` quoted for a message, cut to `limit` characters (and says so)."""
    return repr(text[:limit]) + (f"... ({len(text)} characters)" if len(text) > limit else "")


def short(text: str, what: str, max_chars: int) -> str:
    """`text` when it has at most `max_chars` characters; BadText otherwise."""
    if len(text) > max_chars:
        raise BadText(f"a {len(text)}-character {what}, over the {max_chars} character bound")
    return text


def parse_int(text: str, what: str = "number", *, max_digits: int = MAX_DIGITS,
              low: int = 0, high: int | None = None) -> int:
    """A whole number written in ASCII digits, at most `max_digits` of them (counted before
    any conversion), from `low` to `high`; BadText otherwise."""
    if not isinstance(text, str):
        raise BadText(f"{what} is not text but {type(text).__name__}")
    if not _DIGITS.fullmatch(text):
        raise BadText(f"{what} {shown(text)} is not a whole number (ASCII digits 0-9)")
    if len(text) > max_digits:
        raise BadText(f"{what} has {len(text)} digits, over the {max_digits}-digit bound")
    value = int(text)
    if value < low or (high is not None and value > high):
        raise BadText(f"{what} {value} is outside {low}..{'' if high is None else high}")
    return value


def json_int(text: str) -> int:
    """An integer as `json.loads` hands it to `parse_int`, its digits bounded: Python's own
    guard raises a bare ValueError past 4300 digits."""
    return parse_int(text.lstrip("-"), "a JSON integer") * (-1 if text[0] == "-" else 1)


def parse_decimal(text: str, what: str = "number", *, max_chars: int = 32) -> float:
    """A plain decimal (`12`, `0.5`; no sign, exponent or `inf`), at most `max_chars`
    characters: always finite; BadText otherwise."""
    if not isinstance(text, str):
        raise BadText(f"{what} is not text but {type(text).__name__}")
    short(text, what, max_chars)
    if not _DECIMAL.fullmatch(text):
        raise BadText(f"{what} {shown(text)} is not a plain decimal number")
    return float(text)


@dataclass(frozen=True)
class Span:
    """`low-high` of a range list; `width` > 0 when the low end is zero-padded (`01`)."""

    low: int
    high: int
    width: int = 0

    def __len__(self) -> int:
        return self.high - self.low + 1

    def names(self) -> Iterator[str]:
        return (f"{n:0{self.width}d}" for n in range(self.low, self.high + 1))

    def holds(self, text: str) -> bool:
        """Whether the decimal `text` is one of this span's names, padding included."""
        if not _DIGITS.fullmatch(text) or len(text) > max(len(str(self.high)), self.width):
            return False
        return self.low <= int(text) <= self.high and f"{int(text):0{self.width}d}" == text


def parse_ranges(text: str, what: str = "range", *, max_elements: int = MAX_ELEMENTS,
                 max_digits: int = MAX_DIGITS) -> list[Span]:
    """`0-3,5,07-09` -> its spans, counted and never expanded: an empty or reversed part,
    a bound broken by a number, or more than `max_elements` in all is BadText."""
    parts = text.split(",", max_elements)
    if len(parts) > max_elements:
        raise BadText(f"{what} has more than {max_elements} parts")
    spans: list[Span] = []
    total = 0
    for part in parts:
        low_text, dash, high_text = part.partition("-")
        low = parse_int(low_text, f"{what} {shown(part, 20)}: its low end",
                        max_digits=max_digits)
        high = parse_int(high_text, f"{what} {shown(part, 20)}: its high end",
                         max_digits=max_digits) if dash else low
        if high < low:
            raise BadText(f"{what} {shown(part, 20)} is reversed (its high end is below its low)")
        total += high - low + 1
        if total > max_elements:
            raise BadText(f"{what} {shown(text, 20)} stands for more than {max_elements} "
                          "elements")
        spans.append(Span(low, high, len(low_text) if low_text.startswith("0") else 0))
    return spans


def check_line(line: str, what: str = "line", *, max_len: int = MAX_LINE,
               controls: bool = False) -> str:
    """`line` when it has at most `max_len` characters and (unless `controls`) no control
    character but a tab; BadText otherwise."""
    if len(line) > max_len:
        raise BadText(f"{what} has {len(line)} characters, over the {max_len} bound")
    bad = None if controls else _CONTROL.search(line)
    if bad is not None:
        raise BadText(f"{what} holds the control character {bad.group()!r} at column "
                      f"{bad.start() + 1}")
    return line


def lines(text: str, what: str, *, max_len: int = MAX_LINE, max_lines: int = MAX_LINES,
          controls: bool = False) -> Iterator[tuple[int, str]]:
    """Each line of `text` with its number from 1, every one through `check_line`; BadText
    at the first line past a bound, or past `max_lines` lines."""
    for number, line in enumerate(text.splitlines(), 1):
        if number > max_lines:
            raise BadText(f"{what} has more than {max_lines} lines")
        yield number, check_line(line, f"{what} line {number}", max_len=max_len,
                                 controls=controls)


def fields(line: str, what: str, *, sep: str | None = None,
           max_fields: int = MAX_FIELDS) -> list[str]:
    """`line` split at `sep` (None: runs of white space); BadText past `max_fields`."""
    parts = line.split(sep, max_fields)
    if len(parts) > max_fields:
        raise BadText(f"{what} has more than {max_fields} fields")
    return parts

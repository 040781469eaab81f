"""A run's facts as the fields the listings of runs and nights show: `harness ls` (a row a
folder, `--nights` a row a night), the morning table (`harness report`, `show NIGHT`) and
`harness status`'s night lines. Each surface lays its fields out its own way (docker-like
columns, fixed widths, a line); what a field says is decided here once: a fact the folder
does not say, a status a later attempt superseded, the links between a run and its reruns,
an age, a duration. Every fact comes from a folder anyone who can write the runs dir
controls, so every field is inert. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from harness.readers.report.inert import inert

CELL = 80  # the widest a table cell gets
NONE = "-"  # a fact the folder does not say


def field(value: Any) -> str:
    """One fact as inert text of at most CELL characters; NONE when it is absent."""
    return NONE if value is None or value == "" else inert(value, CELL)


def links(rerun_of: Any = None, superseded_by: Any = None) -> str:
    """`rerun of X; superseded by Y`: how a run stands to the runs around it ("" for none)."""
    return "; ".join([*([f"rerun of {rerun_of}"] if rerun_of else []),
                      *([f"superseded by {superseded_by}"] if superseded_by else [])])


def status_field(status: Any, superseded_by: Any = None) -> str:
    """The status, in parentheses for an attempt a later one superseded (listed, not counted)."""
    return f"({status})" if superseded_by else str(status)


def stamp_time(stamp: str) -> datetime | None:
    """The time a UTC stamp of a folder name says (20261130T021500Z), or None."""
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:  # an empty stamp, or month 13: the name's shape only was checked
        return None


def age(at: datetime | None, now: datetime) -> str:
    """"3m ago", "2h ago", "4d ago" (docker's way), or NONE."""
    if at is None:
        return NONE
    s = max(0, int((now - at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit} ago"
    return f"{s}s ago"


def seconds_text(value: float | None, none: str = "—") -> str:
    """`2.5 s` under two minutes, then `4m05s`, `1h02m`: the one way `ls` and the report
    write a duration (`none` when there is none)."""
    if value is None:
        return none
    if value < 120:
        return f"{value:.1f} s"
    minutes, seconds = divmod(round(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def aligned(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """A header and its rows, columns padded as `docker ps` pads them."""
    table = [header, *body]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return ["   ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
            for line in table]

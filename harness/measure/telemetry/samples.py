"""telemetry.jsonl read back: the one reader. A sealed folder may be read anywhere later, so
every line is untrusted and bounded; a line that is not a sample is a failed read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.base.tree import open_regular
from harness.measure.telemetry.quantities import number
from harness.measure.telemetry.sampler import MAX_LINE, MAX_SAMPLES


@dataclass(frozen=True)
class Point:
    """One line of telemetry.jsonl: when, and its figures (None for a failed read)."""

    t: float
    unix: float
    figures: Mapping[str, Mapping[str, float | None]] | None


def read(path: Path) -> Iterator[Point]:
    """The file's samples, streamed, each line bounded (not a regular file: none)."""
    try:
        fd = open_regular(path)
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        for _ in range(2 * MAX_SAMPLES):
            raw = f.readline(MAX_LINE)
            if not raw:
                return
            yield point(raw)


def point(raw: bytes) -> Point:
    """Pure: one line as a sample, or as a failed read when it is not one."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return Point(0.0, 0.0, None)
    t, unix, figures = (doc.get("t"), doc.get("unix"), doc.get("figures")) \
        if isinstance(doc, dict) else (None, None, None)
    if not (number(t) and number(unix) and isinstance(figures, dict)):
        return Point(t if number(t) else 0.0, 0.0, None)
    return Point(t, unix, {s: v for s, v in figures.items() if isinstance(v, dict)})


"""telemetry.jsonl read back: the one reader of the file the sampler writes.

The sampler writes it in a folder only the harness can write while the run is open, but a
sealed folder may be read anywhere later (a bundle, a copied runs dir): every line is read
as untrusted, bounded, and a line that is not a sample is a failed read, never an error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.measure.telemetry.sampler import MAX_LINE, MAX_SAMPLES


@dataclass(frozen=True)
class Point:
    """One line of telemetry.jsonl: when, and its figures (None for a failed read)."""

    t: float
    unix: float
    figures: Mapping[str, Mapping[str, float | None]] | None


def read(path: Path) -> Iterator[Point]:
    """The file's samples, streamed (an absent file has none)."""
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed by the with below; this is a generator)
    except OSError:
        return
    with f:
        for n, raw in enumerate(f):
            if n >= 2 * MAX_SAMPLES:
                return
            yield point(raw[:MAX_LINE])


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


def number(value: object) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)

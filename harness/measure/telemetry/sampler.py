"""The sampler: every source read at a set interval while the container runs, one JSON line
each time into telemetry.jsonl (`figures`, or `error` when a source failed).

A thread beside the wait for the container: a slow source delays the next sample, never the
control. Slots are fixed (start + k × interval); a late sample skips the slots it missed, so
a gap in the file is a gap in the figures, which `harness.judge.samplefigures` finds.

A source is a name and a `read` of its figures now: `{source name: {quantity: value}}`
(None: not available), perhaps several sources (one per GPU); it raises `Gone` to end the
sampling, anything else is a missed sample.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.base.timeutil import unix_now
from harness.measure.telemetry import quantities as q

MAX_LINE = 64 * 1024  # one sample of a few GPUs is about 1 KiB
MAX_SAMPLES = 200_000  # 55 hours at 1 Hz; the rest of a longer run is not sampled

Figures = dict[str, dict[str, float | None]]


class Gone(Exception):
    """What the source reads has gone (the container exited): sampling ends."""


class Source(Protocol):
    name: str

    def read(self) -> Figures: ...


@dataclass(frozen=True)
class Sampled:
    """What the sampler did, why it stopped, and its own CPU time (`make bench` reports it)."""

    samples: int
    errors: int
    seconds: float
    cpu_s: float
    ended: str  # "stopped" (the container exited), "gone" (its cgroup went first), "full"
    error: str | None = None  # the last source error, if any


def _clean(figures: Figures) -> Figures:
    """Only finite numbers are written (a source's NaN would make the line invalid JSON)."""
    return {src: {k: (v if q.number(v) else None) for k, v in vals.items()}
            for src, vals in figures.items()}


class Sampler:
    """Read `sources` every `interval` seconds into `path` until `stop()`."""

    def __init__(self, sources: Sequence[Source], path: Path, interval: float) -> None:
        self.sources, self.path, self.interval = tuple(sources), Path(path), interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._samples = self._errors = 0
        self._ended, self._error, self._cpu, self._t0 = "stopped", None, 0.0, 0.0

    def start(self) -> Sampler:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
        self._file = os.fdopen(fd, "w", encoding="utf-8")
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> Sampled:
        """Stop after the sample in progress; what was written is fsynced."""
        self._stop.set()
        self._thread.join(timeout=30)
        seconds = time.monotonic() - self._t0
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()
        return Sampled(self._samples, self._errors, round(seconds, 3), round(self._cpu, 6),
                       self._ended, self._error)

    def _sample(self, t: float) -> dict | None:
        figures: Figures = {}
        try:
            for source in self.sources:
                figures.update(source.read())
        except Gone:
            return None
        except Exception as e:  # a failed read is a missed sample, recorded as such
            self._errors += 1
            self._error = f"{type(e).__name__}: {e}"[:300]
            return {"t": round(t, 3), "unix": unix_now(), "error": self._error}
        return {"t": round(t, 3), "unix": unix_now(), "figures": _clean(figures)}

    def _loop(self) -> None:
        cpu0, slot = time.thread_time(), 0
        try:
            while not self._stop.is_set():
                if self._samples >= MAX_SAMPLES:
                    self._ended = "full"
                    return
                line = self._sample(time.monotonic() - self._t0)
                if line is None:
                    self._ended = "gone"
                    return
                text = json.dumps(line, separators=(",", ":"), allow_nan=False)
                if len(text) < MAX_LINE:
                    self._file.write(text + "\n")
                    self._file.flush()
                    self._samples += "figures" in line
                # the next slot still ahead: a late sample skips the slots it missed
                slot = max(slot + 1, math.floor((time.monotonic() - self._t0)
                                                / self.interval) + 1)
                self._stop.wait(max(0.0, self._t0 + slot * self.interval - time.monotonic()))
        finally:
            self._cpu = time.thread_time() - cpu0

"""What a run's telemetry says: each figure's peak and mean, energy where power is known,
the run's phases, and the gaps. Pure.

A gap over twice the interval is named, and refuses the run only when the control asks
for telemetry as evidence. Phase times are written by the workload, so they only split
the summary, never decide anything."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise

from harness.base.catalogue import TELEMETRY_GAP
from harness.base.plural import counted
from harness.base.reason import Reason
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry.samples import Point

MAX_GAPS = 10  # gaps listed in run.json (their count is always given)
PHASES = ("startup", "generation")


@dataclass
class _Figure:
    """Running peak, mean and energy of one quantity of one source."""

    n: int = 0
    total: float = 0.0
    peak: float = -math.inf
    first: float | None = None
    last: float | None = None
    energy: float = 0.0
    prev: tuple[float, float] | None = None  # (t, value) for the trapezoid

    def add(self, t: float, value: float) -> None:
        if self.first is None:
            self.first = value
        self.n, self.total, self.peak, self.last = (self.n + 1, self.total + value,
                                                     max(self.peak, value), value)
        if self.prev is not None:
            self.energy += (t - self.prev[0]) * (value + self.prev[1]) / 2
        self.prev = (t, value)

    def as_dict(self, quantity: str) -> dict:
        mean = None if quantity in q.CUMULATIVE else round(self.total / self.n, 6)
        out = {"peak": self.peak, "mean": mean, "last": self.last, "samples": self.n,
               "unit": q.UNITS.get(quantity)}
        if quantity == q.POWER_W:
            out["energy_j"] = round(self.energy, 3)
        return out


@dataclass
class _Summary:
    figures: dict[tuple[str, str], _Figure] = field(default_factory=dict)

    def add(self, point: Point) -> None:
        for source, values in (point.figures or {}).items():
            for quantity, value in values.items():
                if q.number(value):
                    self.figures.setdefault((source, quantity), _Figure()).add(point.t, value)

    def as_dict(self) -> dict:
        out: dict[str, dict] = {}
        for (source, quantity), fig in sorted(self.figures.items()):
            out.setdefault(source, {})[quantity] = fig.as_dict(quantity)
        return out


def gaps(times: list[float], interval: float, end: float) -> list[tuple[float, float]]:
    """Pure: each stretch longer than twice the interval without a sample, from the
    sampler's start (0) to `end`, in seconds since the start."""
    edges = [0.0, *times, max(end, times[-1] if times else 0.0)]
    limit = 2 * interval
    return [(a, b) for a, b in pairwise(edges) if b - a > limit]


def summarise(points: Iterable[Point], *, interval: float, end: float,
              startup_unix: float | None = None) -> dict:
    """Pure: the telemetry block of run.json for these samples."""
    whole, phases = _Summary(), {p: _Summary() for p in PHASES}
    times: list[float] = []
    errors = 0
    for point in points:
        if point.figures is None:
            errors += 1
            continue
        times.append(point.t)
        whole.add(point)
        if startup_unix is not None:
            phases["startup" if point.unix <= startup_unix else "generation"].add(point)
    holes = gaps(times, interval, end)
    doc: dict = {"interval_s": interval, "samples": len(times), "errors": errors,
                 "gaps": len(holes), "max_gap_s": round(max((b - a for a, b in holes),
                                                             default=0.0), 3),
                 "gaps_at": [[round(a, 3), round(b, 3)] for a, b in holes[:MAX_GAPS]],
                 "figures": whole.as_dict()}
    doc["cpu_pct_mean"] = _cpu_pct(whole.figures.get(("container", q.CPU_S)), times)
    if startup_unix is not None:
        doc["phases"] = {p: s.as_dict() for p, s in phases.items() if s.figures}
    energy = [f.energy for (_, quantity), f in whole.figures.items() if quantity == q.POWER_W]
    doc["energy_j"] = round(sum(energy), 3) if energy else None
    return doc


def _cpu_pct(cpu: _Figure | None, times: list[float]) -> float | None:
    """The container's mean CPU use between its first and last sample, in % of one core."""
    if cpu is None or cpu.n < 2 or cpu.first is None or cpu.last is None \
            or len(times) < 2 or times[-1] <= times[0]:
        return None
    return round(100 * (cpu.last - cpu.first) / (times[-1] - times[0]), 2)


def refusals(doc: Mapping, *, required: bool, why: str | None = None) -> list[Reason]:
    """Pure: the refusal a required telemetry earns: no sample at all, or a gap over twice
    the interval. Not required: none (the gaps are a note in the block itself)."""
    if not required:
        return []
    if why is not None or not doc.get("samples"):
        return [Reason(TELEMETRY_GAP, f"no telemetry sample: {why or 'none was taken'}")]
    if doc.get("gaps"):
        first = doc.get("gaps_at") or [[0, 0]]
        return [Reason(TELEMETRY_GAP, f"{counted(doc['gaps'], 'gap')} over twice the "
                       f"{doc['interval_s']:g} s interval, the longest {doc['max_gap_s']:g} s "
                       f"(first from {first[0][0]:g} s to {first[0][1]:g} s)")]
    return []

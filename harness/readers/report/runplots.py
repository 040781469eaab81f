"""One run's telemetry as a plot for the morning report: what the container (and on rocm
each GPU) did over the run, with axes and units.

`series` keeps at most MAX_POINTS per figure, the highest of each time slice, so a short
peak is never smoothed away. Units: memory MiB, CPU % of one core (from cumulative CPU
time), GPU W and °C; x is seconds since the sampler (the container) started."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.measure.runfolder import layout
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry import samples
from harness.readers.report.inert import inert
from harness.readers.report.plots import pyplot, svg_of

MAX_POINTS = 240
Series = dict[str, dict[str, list[list[float]]]]  # source -> quantity -> [[t, value], ...]
# panel title, unit, quantity, scale from the stored unit
PANELS = (("memory", "MiB", q.MEMORY_BYTES, 1 / (1 << 20)),
          ("CPU", "% of one core", q.CPU_S, 1.0),
          ("GPU power", "W", q.POWER_W, 1.0),
          ("GPU temperature", "°C", q.TEMPERATURE_C, 1.0))


def series(points: Iterable[samples.Point], max_points: int = MAX_POINTS) -> Series:
    """Pure: each figure's samples, at most `max_points` of them (slice maxima)."""
    raw: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for p in points:
        for source, values in (p.figures or {}).items():
            for quantity, value in values.items():
                if q.number(value) and quantity in q.QUANTITIES:
                    raw.setdefault((source, quantity), []).append((p.t, float(value)))
    out: Series = {}
    for (source, quantity), pts in sorted(raw.items()):
        if quantity == q.CPU_S:
            pts = cpu_percent(pts)
        out.setdefault(source, {})[quantity] = [[round(t, 3), v] for t, v in
                                                _thinned(pts, max_points)]
    return out


def cpu_percent(pts: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Pure: cumulative CPU seconds as % of one core over each interval between samples."""
    out = []
    for (t0, c0), (t1, c1) in itertools.pairwise(pts):
        if t1 > t0 and c1 >= c0:
            out.append((t1, round(100 * (c1 - c0) / (t1 - t0), 2)))
    return out


def _thinned(pts: Sequence[tuple[float, float]], n: int) -> list[tuple[float, float]]:
    if len(pts) <= n:
        return list(pts)
    size = len(pts) / n
    return [max(pts[int(i * size):int((i + 1) * size)] or [pts[-1]], key=lambda p: p[1])
            for i in range(n)]


def read_series(run_dir: Path | str) -> Series:
    """A run folder's telemetry as `series` (empty when it has none)."""
    return series(samples.read(Path(run_dir) / layout.TELEMETRY))


def valid(data: Any) -> Series:
    """summary.json's copy is read back like any input: only [t, v] number pairs."""
    out: Series = {}
    for source, values in (data or {}).items() if isinstance(data, Mapping) else ():
        for quantity, pts in (values or {}).items() if isinstance(values, Mapping) else ():
            good = [p for p in pts if isinstance(p, list) and len(p) == 2
                    and all(q.number(x) for x in p)] if isinstance(pts, list) else []
            if good and quantity in q.QUANTITIES:
                out.setdefault(str(source), {})[quantity] = good
    return out


def telemetry_svg(data: Any, prefix: str, title: str) -> str | None:
    """The run's panels as one inline SVG; None when nothing was sampled."""
    found = valid(data)
    panels = [(name, unit, quantity, scale) for name, unit, quantity, scale in PANELS
              if any(quantity in values for values in found.values())]
    if not panels:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.2, 1.6 * len(panels) + 0.6),
                             sharex=True, squeeze=False)
    for ax, (name, unit, quantity, scale) in zip(axes[:, 0], panels, strict=True):
        for source, values in sorted(found.items()):
            pts = values.get(quantity)
            if pts:
                ax.plot([t for t, _ in pts], [v * scale for _, v in pts], linewidth=1.2,
                        label=inert(source, 24))
        ax.set_ylim(bottom=0)
        ax.set_ylabel(f"{name} ({unit})", fontsize=8)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    axes[-1, 0].set_xlabel("seconds since the container started")
    axes[0, 0].set_title(title, loc="left", fontsize=10)
    height = 1.6 * len(panels) + 0.6  # inches: margins for the title, the x label, legends
    fig.subplots_adjust(left=0.11, right=0.80, top=1 - 0.35 / height, bottom=0.5 / height,
                        hspace=0.25)
    return svg_of(plt, fig, prefix, title, tight=False)  # laid out: one drawing pass

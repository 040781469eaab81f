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
from harness.readers.report import svgchart as chart
from harness.readers.report.inert import inert
from harness.readers.report.plots import PLOT_W, _tick

MAX_POINTS = 240
PANEL_H, GAP, TOP = 112, 14, 28  # px: a panel, the space between panels, the title above
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


SOURCE_CHARS = 64  # a source's name as the summary keeps it (the legend cuts it shorter)


def valid(data: Any) -> Series:
    """The telemetry file's series, and summary.json's copy, read back like any input: only
    [t, v] number pairs, each source named by inert text (its name is any JSON string the file
    holds, and summary.json carries it to a terminal and to strict JSON readers)."""
    out: Series = {}
    for source, values in (data or {}).items() if isinstance(data, Mapping) else ():
        for quantity, pts in (values or {}).items() if isinstance(values, Mapping) else ():
            good = [p for p in pts if isinstance(p, list) and len(p) == 2
                    and all(q.number(x) for x in p)] if isinstance(pts, list) else []
            if good and quantity in q.QUANTITIES:
                out.setdefault(inert(source, SOURCE_CHARS), {})[quantity] = good
    return out


def telemetry_svg(data: Any, prefix: str, title: str) -> str | None:
    """The run's panels as one inline SVG, stacked over one time axis; None when nothing
    was sampled."""
    found = valid(data)
    panels = [(name, unit, quantity, scale) for name, unit, quantity, scale in PANELS
              if any(quantity in values for values in found.values())]
    if not panels:
        return None
    sources = sorted(found)
    colours = {s: chart.PALETTE[i % len(chart.PALETTE)] for i, s in enumerate(sources)}
    times = [t for values in found.values() for pts in values.values() for t, _ in pts]
    t0, t1 = min(times), max(times)
    if t1 == t0:  # one sample: a second around it
        t0, t1 = t0 - 0.5, t1 + 0.5
    xticks = chart.ticks(t0, t1)
    body: list[str] = [chart.text(8, 16, title, size=10)]
    tops = [TOP + i * (PANEL_H + GAP) for i in range(len(panels))]
    scaled = [{s: [(t, v * scale) for t, v in found[s].get(quantity, [])] for s in sources}
              for _, _, quantity, scale in panels]
    hi = [max((v for pts in by.values() for _, v in pts), default=0) for by in scaled]
    yticks = [[(v, _tick(v)) for v in chart.ticks(0, top * 1.05 or 1.0, 3)] for top in hi]
    left = 30 + max(chart.width_of(label, 9) for ys in yticks for _, label in ys)
    for i, ((name, unit, _, _), by) in enumerate(zip(panels, scaled, strict=True)):
        p = chart.Panel(left, tops[i], PLOT_W, PANEL_H, t0, t1, 0, hi[i] * 1.05 or 1.0)
        bottom = i == len(panels) - 1
        body += p.frame([(t, _tick(t) if bottom else "") for t in xticks], yticks[i],
                        ylabel=f"{name} ({unit})",
                        xlabel="seconds since the container started" if bottom else "")
        keys = []
        for source in sources:
            if by[source]:
                body.append(chart.polyline([(p.px(t), p.py(v)) for t, v in by[source]],
                                           colours[source]))
                keys.append((inert(source, 24), colours[source], "", True))
        body += chart.legend(left + PLOT_W + 12, tops[i] + 6, keys)
    width = left + PLOT_W + 12 + chart.legend_width([inert(s, 24) for s in sources])
    height = max(tops[-1] + PANEL_H + 44, chart.legend_bottom(tops[-1] + 6, len(sources)))
    return chart.document(width, height, prefix, title, body)

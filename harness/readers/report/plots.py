"""The morning report's plots across nights: static SVG (harness.readers.report.svgchart),
offline, inline in the page.

Honest scales: a figure that cannot be negative is drawn from zero, so a 2 ppm change
stays flat and a doubling doubles; the title says the spread the eye may not see. Points
not accepted carry a red cross and each status its own marker shape, readable without
colour. Ids are prefixed per plot so several plots in one page cannot collide."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.states import State
from harness.readers.report import svgchart as chart
from harness.readers.report.inert import inert

STATUS_STYLE = {  # status: (marker, colour); shape and colour both carry the status
    State.ACCEPTED: ("o", "#1a7f37"), State.REFUSED: ("X", "#c62828"),
    State.FAILED: ("^", "#d9822b"), State.TIMED_OUT: ("v", "#d9822b"),
    State.INTERRUPTED: ("s", "#666666"), State.DEFERRED: ("D", "#666666"),
}
OTHER_STYLE = ("P", "#666666")
CONTROL_MARKERS = ("o", "s", "D", "^", "v", "P", "*", "h")
MAX_TICKS = 10
CROWDED = 30  # nights; past it markers are drawn smaller so the lines stay readable
MAX_EXIT_LABELS = 20  # nights; past that the labels would overlap and cost more than they say
MAX_PLOTTED = 1e15  # past it a figure is not a measurement (and its axis would overflow)
PLOT_W, PLOT_H = 470, 170  # px of the plotting area
TOP, BOTTOM = 26, 74  # px above (the title) and below it (rotated night labels, the x label)
XLABEL = "night (UTC start)"
CROSS = "#c62828"


def _night_ticks(nights: Sequence[str]) -> list[tuple[float, str]]:
    """Every night up to MAX_TICKS of them, else about MAX_TICKS evenly at round steps."""
    n = len(nights)
    at = range(n) if n <= MAX_TICKS else sorted(
        {int(t) for t in chart.ticks(0, n - 1, MAX_TICKS - 1) if t == int(t)})
    return [(x, nights[x]) for x in at]


def _night_panel(left: float, height: float, n: int, lo: float, hi: float) -> chart.Panel:
    return chart.Panel(left, TOP, PLOT_W, height, -0.5, n - 0.5, lo, hi)


def spread_text(values: Sequence[float], unit: str) -> str:
    """`3.01–3.05 s, spread 1.3 %` (the spread as a share of the largest |value|)."""
    lo, hi = min(values), max(values)
    top = max(abs(lo), abs(hi))
    pct = f", spread {percent(100 * (hi - lo) / top)} %" if top and len(values) > 1 else ""
    return f"{_tick(lo)}–{_tick(hi)} {unit}".rstrip() + pct


def percent(value: float) -> str:
    """`100`, `12`, `1.3`, `0.25`, `< 0.01`, `0`: two figures at most, never an exponent."""
    if value >= 10:
        return f"{value:.0f}"
    if value >= 0.01 or value == 0:
        return f"{value:.2g}"
    return "< 0.01"


def y_limits(values: Sequence[float]) -> tuple[float, float]:
    """From zero for a figure that is never negative (the spread shows as it is); otherwise
    the data padded by a tenth of its magnitude. Never a range the data does not justify."""
    lo, hi = min(values), max(values)
    top = max(abs(lo), abs(hi)) or 1.0
    if lo >= 0:
        return 0.0, hi * 1.12 if hi > 0 else 1.0
    pad = max(hi - lo, top) * 0.1
    return lo - pad, hi + pad


def _tick(value: float) -> str:
    """Plain tick labels: no offset, no `1e6` above the axis that a reader may miss."""
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def figure_plot(nights: Sequence[str], series: Mapping[str, Sequence[Any]],
                statuses: Mapping[str, Sequence[str | None]], title: str, unit: str,
                prefix: str) -> str:
    """One figure across nights, one line per control; a red cross on each point whose run
    was not accepted, so a slow night is never mistaken for a refused one."""
    crowded = len(nights) > CROWDED
    found = [float(v) for values in series.values() for v in values if v is not None]
    lo, hi = y_limits(found)
    yticks = [(v, _tick(v)) for v in chart.ticks(lo, hi)]
    left = 30 + max(chart.width_of(label, 9) for _, label in yticks)
    p = _night_panel(left, PLOT_H, len(nights), lo, hi)
    body = p.frame(_night_ticks(nights), yticks, ylabel=f"{title} ({unit})" if unit else title,
                   xlabel=XLABEL, rotate=True)
    data, crosses, keys = [], [], []
    for i, (control, values) in enumerate(sorted(series.items())):
        colour, marker = chart.PALETTE[i % len(chart.PALETTE)], CONTROL_MARKERS[i % len(
            CONTROL_MARKERS)]
        pts = [(p.px(x), p.py(float(v))) for x, v in enumerate(values) if v is not None]
        data += [chart.polyline(pts, colour), chart.markers(pts, marker, 3 if crowded else 5,
                                                           colour)]
        crosses += [(p.px(x), p.py(float(v))) for x, v in enumerate(values)
                    if v is not None and statuses[control][x] not in (None, State.ACCEPTED)]
        keys.append((inert(control, 40), colour, marker, True))
    if crosses:  # the cross explained, after the controls
        data.append(chart.markers(crosses, "x", 5.5 if crowded else 8.5, CROSS))
        keys.append(("not accepted", CROSS, "x", False))
    body += [f'<g clip-path="url(#{prefix}-area)">', *data, "</g>"]
    body.append(chart.text(left, 16, f"{title} ({spread_text(found, unit)})", size=10))
    right = left + PLOT_W + 12
    body += chart.legend(right, TOP + 6, keys)
    width = right + chart.legend_width([k[0] for k in keys])
    height = max(TOP + PLOT_H + BOTTOM, chart.legend_bottom(TOP + 6, len(keys)))
    return chart.document(width, height, prefix, title, body, clip=p)


def status_plot(nights: Sequence[str], statuses: Mapping[str, Sequence[str | None]],
                exits: Mapping[str, Sequence[Any]], prefix: str) -> str:
    """Every control's status per night as a marker, one mark per status; exit codes
    beside runs not exiting 0 up to MAX_EXIT_LABELS nights (past that the table carries it)."""
    controls = sorted(statuses)
    names = [inert(c, 40) for c in controls]
    left = 16 + max(chart.width_of(name, 9) for name in names)
    p = _night_panel(left, max(40, 23 * len(controls)), len(nights), -0.6,
                     len(controls) - 0.4)
    body = p.frame(_night_ticks(nights), list(enumerate(names)), xlabel=XLABEL, rotate=True,
                   grid=False)
    groups: dict[str, list[tuple[float, float]]] = {}
    labelled = len(nights) <= MAX_EXIT_LABELS
    for y, control in enumerate(controls):
        for x, status in enumerate(statuses[control]):
            if status is None:
                continue
            at = (p.px(x), p.py(y))
            groups.setdefault(status if status in STATUS_STYLE else "other", []).append(at)
            code = exits[control][x]
            if code not in (None, 0) and labelled:
                body.append(chart.text(at[0] + 6, at[1] + 6, f"exit {code}", size=7,
                                       colour="#333333"))
    keys = []
    for key, points in sorted(groups.items()):
        marker, colour = STATUS_STYLE.get(key, OTHER_STYLE)
        body.append(chart.markers(points, marker, 7.5 if len(nights) <= CROWDED else 4.5,
                                  colour))
        keys.append((key, colour, marker, False))
    note = "exit code beside runs that did not exit 0" if labelled \
        else "exit codes: see the table or the perf log"
    body.append(chart.text(left, 16, f"status per night ({note})", size=10))
    right = left + PLOT_W + 12
    body += chart.legend(right, TOP + 6, keys)
    width = max(right + chart.legend_width([k[0] for k in keys]), left + 8 + chart.width_of(
        f"status per night ({note})", 10))
    height = max(TOP + p.height + BOTTOM, chart.legend_bottom(TOP + 6, len(keys)))
    return chart.document(width, height, prefix, "status per night", body)


def _plottable(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if abs(value) <= MAX_PLOTTED else None  # NaN compares false: left out too


def render_plots(nights: Sequence[str], trends: Mapping[str, Sequence[Mapping[str, Any]]],
                 shown: Sequence[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """[(title, svg)] for a campaign's nights: the status plot, then one per figure in `shown`
    (name, title, unit) that has a value somewhere."""
    if not trends or not nights:
        return []
    statuses = {c: [v.get("status") for v in pts] for c, pts in trends.items()}
    exits = {c: [v.get("exit_code") for v in pts] for c, pts in trends.items()}
    plots = [("status per night", status_plot(nights, statuses, exits, "p0"))]
    for i, (name, title, unit) in enumerate(shown, start=1):
        series = {c: [_plottable(v.get(name)) for v in pts] for c, pts in trends.items()}
        series = {c: s for c, s in series.items() if any(v is not None for v in s)}
        if series:
            plots.append((title, figure_plot(nights, series, statuses, title, unit,
                                             f"p{i}")))
    return plots

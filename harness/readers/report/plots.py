"""The morning report's plots: static SVG drawn by matplotlib, offline, inline in the page.

Honest scales: a figure that cannot be negative is drawn from zero, so a 2 ppm change
stays flat and a doubling doubles; the title says the spread the eye may not see. Points
not accepted carry a red cross and each status its own marker shape, readable without
colour. matplotlib is imported lazily (it takes most of a second), fetches nothing, and
SVG ids are prefixed per plot so several plots in one page cannot collide."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.states import State
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
_ID = re.compile(r'\bid="([^"]+)"')


def pyplot() -> Any:
    """matplotlib's pyplot for the report's plots. `text.parse_math` is off, so a name
    holding `$` is never mathtext (whose parser raises on what it cannot read)."""
    import matplotlib

    matplotlib.use("svg", force=True)
    matplotlib.rcParams.update({
        "svg.fonttype": "path", "svg.hashsalt": "harness-report", "font.family": "DejaVu Sans",
        "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
        "figure.dpi": 72, "text.parse_math": False,
    })
    import matplotlib.pyplot as plt

    return plt


def svg_of(plt: Any, fig: Any, prefix: str, title: str, *, tight: bool = True) -> str:
    """The figure as inline SVG, its ids prefixed. `tight` costs a second drawing pass
    (about half the cost); a figure laid out to fit says False."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight" if tight else None,
                metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    ids = set(_ID.findall(text))
    for ident in sorted(ids, key=len, reverse=True):
        text = text.replace(f'id="{ident}"', f'id="{prefix}-{ident}"')
        text = text.replace(f"#{ident})", f"#{prefix}-{ident})")
        text = text.replace(f'href="#{ident}"', f'href="#{prefix}-{ident}"')
    label = title.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
    return text.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


def _axis(ax: Any, nights: Sequence[str]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    n = len(nights)
    if n <= MAX_TICKS:
        ax.xaxis.set_major_locator(FixedLocator(range(n)))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(MAX_TICKS, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: nights[int(x)] if 0 <= int(x) < n and x == int(x) else ""))
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_xlabel("night (UTC start)")
    ax.tick_params(axis="x", labelrotation=30)
    ax.grid(axis="y", color="#e5e5e5", linewidth=0.6)


def spread_text(values: Sequence[float], unit: str) -> str:
    """`3.01–3.05 s, spread 1.3 %` (the spread as a share of the largest |value|)."""
    lo, hi = min(values), max(values)
    top = max(abs(lo), abs(hi))
    pct = f", spread {100 * (hi - lo) / top:.2g} %" if top and len(values) > 1 else ""
    return f"{_tick(lo)}–{_tick(hi)} {unit}".rstrip() + pct


def y_limits(values: Sequence[float]) -> tuple[float, float]:
    """From zero for a figure that is never negative (the spread shows as it is); otherwise
    the data padded by a tenth of its magnitude. Never a range the data does not justify."""
    lo, hi = min(values), max(values)
    top = max(abs(lo), abs(hi)) or 1.0
    if lo >= 0:
        return 0.0, hi * 1.12 if hi > 0 else 1.0
    pad = max(hi - lo, top) * 0.1
    return lo - pad, hi + pad


def _tick(value: float, _: Any = None) -> str:
    """Plain tick labels: no offset, no `1e6` above the axis that a reader may miss."""
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def figure_plot(plt: Any, nights: Sequence[str], series: Mapping[str, Sequence[Any]],
                statuses: Mapping[str, Sequence[str | None]], title: str, unit: str,
                prefix: str) -> str:
    """One figure across nights, one line per control; a red cross on each point whose run
    was not accepted, so a slow night is never mistaken for a refused one."""
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(7.2, 2.9))
    found: list[float] = []
    crossed = False
    for i, (control, values) in enumerate(sorted(series.items())):
        xs = [x for x, v in enumerate(values) if v is not None]
        ys = [float(values[x]) for x in xs]
        found += ys
        ax.plot(xs, ys, marker=CONTROL_MARKERS[i % len(CONTROL_MARKERS)],
                markersize=4 if len(nights) <= CROWDED else 2,
                linewidth=1.2, label=inert(control, 40))
        bad = [(x, float(values[x])) for x in xs
               if statuses[control][x] not in (None, State.ACCEPTED)]
        if bad:
            ax.scatter(*zip(*bad, strict=True), marker="x", color="#c62828",
                       s=70 if len(nights) <= CROWDED else 30,
                       linewidths=1.8, zorder=5, label=None if crossed else "not accepted")
            crossed = True
    _axis(ax, nights)
    ax.set_ylim(*y_limits(found))
    ax.yaxis.set_major_formatter(FuncFormatter(_tick))
    ax.set_ylabel(f"{title} ({unit})" if unit else title)
    ax.set_title(f"{title} ({spread_text(found, unit)})", loc="left", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if "not accepted" in labels:  # the cross explained, whichever control had it first
        i = labels.index("not accepted")
        handles.append(handles.pop(i))
        labels.append(labels.pop(i))
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              frameon=False)
    return svg_of(plt, fig, prefix, title)


def status_plot(plt: Any, nights: Sequence[str], statuses: Mapping[str, Sequence[str | None]],
                exits: Mapping[str, Sequence[Any]], prefix: str) -> str:
    """Every control's status per night as a marker, one scatter per status; exit codes
    beside runs not exiting 0 up to MAX_EXIT_LABELS nights (past that the table carries it)."""
    controls = sorted(statuses)
    fig, ax = plt.subplots(figsize=(7.2, 0.9 + 0.32 * len(controls)))
    groups: dict[str, list[tuple[int, int]]] = {}
    for y, control in enumerate(controls):
        for x, status in enumerate(statuses[control]):
            if status is not None:
                groups.setdefault(status if status in STATUS_STYLE else "other", []).append((x, y))
            code = exits[control][x]
            if status is not None and code not in (None, 0) and len(nights) <= MAX_EXIT_LABELS:
                ax.annotate(f"exit {code}", (x, y), xytext=(6, -3), textcoords="offset points",
                            fontsize=7, color="#333333")
    for key, points in sorted(groups.items()):
        marker, colour = STATUS_STYLE.get(key, OTHER_STYLE)
        ax.scatter(*zip(*points, strict=True), marker=marker, color=colour, zorder=3,
                   s=60 if len(nights) <= CROWDED else 20, label=key)
    _axis(ax, nights)
    ax.set_yticks(range(len(controls)), [inert(c, 40) for c in controls])
    ax.set_ylim(-0.6, len(controls) - 0.4)
    note = "exit code beside runs that did not exit 0" if len(nights) <= MAX_EXIT_LABELS \
        else "exit codes: see the table or the perf log"
    ax.set_title(f"status per night ({note})", loc="left", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return svg_of(plt, fig, prefix, "status per night")


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
    plt = pyplot()
    statuses = {c: [v.get("status") for v in pts] for c, pts in trends.items()}
    exits = {c: [v.get("exit_code") for v in pts] for c, pts in trends.items()}
    plots = [("status per night", status_plot(plt, nights, statuses, exits, "p0"))]
    for i, (name, title, unit) in enumerate(shown, start=1):
        series = {c: [_plottable(v.get(name)) for v in pts] for c, pts in trends.items()}
        series = {c: s for c, s in series.items() if any(v is not None for v in s)}
        if series:
            plots.append((title, figure_plot(plt, nights, series, statuses, title, unit,
                                             f"p{i}")))
    return plots

"""Small hand-written SVG line plots for the morning summary: no library, no external assets.

A plot is one metric across the nights of a campaign. Missing values leave a gap rather
than a fake zero, and every point carries a <title> so a reader can hover for the exact
value. All text is XML-escaped, so the output is well-formed XML and safe inline in HTML.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from xml.sax.saxutils import escape, quoteattr

from harness.report.inert import inert

Point = tuple[str, float | int | None]


def fmt(value: float | int | None, unit: str = "") -> str:
    """A short human form of a metric value: 3 significant decimals at most."""
    if not _finite(value):  # None, NaN, Infinity, a non-number: never shown as a figure
        return "—"
    if isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    elif abs(value) >= 100:
        text = f"{value:,.1f}"
    else:
        text = f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return f"{text} {unit}".strip() if unit and unit != "x" else f"{text}{unit}"


def _finite(v: float | int | None) -> bool:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an int too large for a float is not a plottable figure
        return False


def _marks(points: Sequence[Point], xy: Callable[[int, float], tuple[float, float]],
           unit: str) -> list[str]:
    """The line (broken at gaps) and one dot with a tooltip per value."""
    parts: list[str] = []
    segments: list[list[tuple[float, float]]] = [[]]
    for i, (_, v) in enumerate(points):
        if _finite(v):
            segments[-1].append(xy(i, float(v)))
        elif segments[-1]:
            segments.append([])
    for seg in segments:
        if len(seg) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in seg)
            parts.append(f'<polyline points="{path}" fill="none" stroke="#3465a4" '
                         'stroke-width="1.5"/>')
    for i, (label, v) in enumerate(points):
        if _finite(v):
            x, y = xy(i, float(v))
            tip = f"{inert(label, 200)}: {fmt(v, unit)}"
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="#3465a4">'
                         f"<title>{escape(tip)}</title></circle>")
    return parts


def line_plot(
    points: Sequence[Point],
    *,
    title: str,
    unit: str = "",
    width: int = 320,
    height: int = 120,
) -> str:
    """An SVG document plotting `points` (label, value) in order, gaps where value is None."""
    pad_l, pad_r, pad_t, pad_b = 8, 8, 22, 18
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    values = [float(v) for _, v in points if _finite(v)]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label={quoteattr(title)}>',
        f"<title>{escape(title)}</title>",
        f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fff" '
        'stroke="#ccc"/>',
        f'<text x="{pad_l}" y="14" font-size="11" font-family="sans-serif" fill="#333">'
        f"{escape(title)}</text>",
    ]
    if not values:
        parts.append(
            f'<text x="{width / 2:.1f}" y="{pad_t + plot_h / 2:.1f}" font-size="11" '
            'font-family="sans-serif" fill="#999" text-anchor="middle">no data</text>'
        )
        parts.append("</svg>")
        return "".join(parts)
    # Scaled into [-1, 1] first: `hi - lo` of huge values would overflow to inf, and
    # `lo - 1` of 9e15 is lo again (a zero span); in the scaled space neither can happen.
    scale = max(abs(min(values)), abs(max(values))) or 1.0
    lo, hi = min(values) / scale, max(values) / scale
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    n = len(points)

    def xy(i: int, v: float) -> tuple[float, float]:
        x = pad_l + (plot_w * (i / (n - 1)) if n > 1 else plot_w / 2)
        y = pad_t + plot_h * (1 - (v / scale - lo) / (hi - lo))
        return x, y

    parts += _marks(points, xy, unit)
    last = next((v for _, v in reversed(points) if _finite(v)), None)
    parts.append(
        f'<text x="{width - pad_r}" y="14" font-size="11" font-family="sans-serif" '
        f'fill="#333" text-anchor="end">{escape(fmt(last, unit))}</text>'
    )
    parts.append(
        f'<text x="{pad_l}" y="{height - 5}" font-size="9" font-family="sans-serif" '
        f'fill="#777">{escape(fmt(min(values), unit))} – {escape(fmt(max(values), unit))}'
        f" over {n} night{'s' if n != 1 else ''}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)

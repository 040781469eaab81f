"""Charts as inline SVG, drawn here rather than by a plotting library: axes with ticks and
labels, a title, a legend, lines and marker shapes. Text stays text (the reader's font,
selectable and searchable); a chart of a year of nights costs milliseconds, where
importing matplotlib alone took a second.

Pure. Callers pass inert text; every string is escaped here."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
FONT = "DejaVu Sans,Verdana,Arial,sans-serif"
CHAR = 0.62  # a glyph's width per px of font size, generous: room for a label in the layout
AXIS, GRID, INK = "#444444", "#e5e5e5", "#222222"
LINE_H = 14  # a legend row


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def width_of(text: str, size: float) -> float:
    return len(text) * size * CHAR


def num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _ring(n: int, radii: Sequence[float], start: float) -> list[tuple[float, float]]:
    return [(radii[k % len(radii)] * math.cos(math.radians(start + 360 * k / n)),
             radii[k % len(radii)] * math.sin(math.radians(start + 360 * k / n)))
            for k in range(n)]


_PLUS = [(-0.35, -1), (0.35, -1), (0.35, -0.35), (1, -0.35), (1, 0.35), (0.35, 0.35),
         (0.35, 1), (-0.35, 1), (-0.35, 0.35), (-1, 0.35), (-1, -0.35), (-0.35, -0.35)]
SHAPES = {  # matplotlib's marker letters, as polygons of radius about 1 ("o" is a circle)
    "s": [(-0.9, -0.9), (0.9, -0.9), (0.9, 0.9), (-0.9, 0.9)],
    "D": [(0, -1.2), (1.2, 0), (0, 1.2), (-1.2, 0)],
    "^": [(0, -1.2), (1.1, 0.8), (-1.1, 0.8)],
    "v": [(0, 1.2), (1.1, -0.8), (-1.1, -0.8)],
    "P": _PLUS,
    "X": [(x * 0.85 - y * 0.85, x * 0.85 + y * 0.85) for x, y in _PLUS],
    "*": _ring(10, (1.3, 0.55), -90),
    "h": _ring(6, (1.1,), 90),
}


def markers(points: Sequence[tuple[float, float]], kind: str, size: float, colour: str,
            ) -> str:
    """One path of every point's marker (`x`: a stroked cross; others filled shapes). Each
    marker is a move to the point and the shape's relative steps, formatted once: a year
    of nights draws thousands of markers."""
    r = size / 2
    if kind in SHAPES:
        corners = [(round(dx * r, 1), round(dy * r, 1)) for dx, dy in SHAPES[kind]]
        start, steps = corners[0], "".join(
            f"l{num(bx - ax)},{num(by - ay)}" for (ax, ay), (bx, by) in pairwise(corners)) + "z"
    elif kind == "x":
        w = num(2 * r)
        start, steps = (-r, -r), f"l{w},{w}m0,-{w}l-{w},{w}"
    else:  # a circle: two arcs, their radius exactly half the chord (else one bulges)
        r = round(r, 1)
        a, w = num(r), num(2 * r)
        start, steps = (-r, 0), f"a{a},{a} 0 1 0 {w},0a{a},{a} 0 1 0 -{w},0z"
    d = "".join(f"M{num(x + start[0])},{num(y + start[1])}{steps}" for x, y in points)
    if kind == "x":
        return f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.8"/>'
    return f'<path d="{d}" fill="{colour}"/>'


def polyline(points: Sequence[tuple[float, float]], colour: str) -> str:
    if len(points) < 2:
        return ""
    pts = " ".join(f"{num(x)},{num(y)}" for x, y in points)
    return (f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.2" '
            'stroke-linejoin="round"/>')


def text(x: float, y: float, label: str, size: float = 9, anchor: str = "start",
         rotate: float = 0, colour: str = INK) -> str:
    turn = f' transform="rotate({num(rotate)} {num(x)} {num(y)})"' if rotate else ""
    return (f'<text x="{num(x)}" y="{num(y)}" font-size="{num(size)}" text-anchor="{anchor}" '
            f'fill="{colour}"{turn}>{esc(label)}</text>')


def ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round values (1, 2, 2.5 or 5 times a power of ten apart) from lo to hi, about n."""
    raw = (hi - lo) / n
    if not (math.isfinite(raw) and raw > 0):
        return [lo]
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    return [round(k * step, 12) for k in range(first, first + 2 * n + 2)
            if k * step <= hi + step * 1e-9]


@dataclass(frozen=True)
class Panel:
    """A plotting area in pixels (left, top, width, height) over data x0..x1, y0..y1."""

    left: float
    top: float
    width: float
    height: float
    x0: float
    x1: float
    y0: float
    y1: float

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / ((self.x1 - self.x0) or 1) * self.width

    def py(self, y: float) -> float:
        return self.top + self.height - (y - self.y0) / ((self.y1 - self.y0) or 1) * self.height

    def frame(self, xticks: Sequence[tuple[float, str]], yticks: Sequence[tuple[float, str]],
              *, ylabel: str = "", xlabel: str = "", rotate: bool = False, grid: bool = True,
              ) -> list[str]:
        """Grid, the left and bottom axes, their ticks and labels."""
        left, bottom, right = self.left, self.top + self.height, self.left + self.width
        out = []
        for y, label in yticks:
            py = self.py(y)
            if grid:
                out.append(f'<line x1="{num(left)}" y1="{num(py)}" x2="{num(right)}" '
                           f'y2="{num(py)}" stroke="{GRID}" stroke-width="0.6"/>')
            out.append(f'<line x1="{num(left - 4)}" y1="{num(py)}" x2="{num(left)}" '
                       f'y2="{num(py)}" stroke="{AXIS}"/>')
            out.append(text(left - 6, py + 3, label, anchor="end"))
        for x, label in xticks:
            px = self.px(x)
            out.append(f'<line x1="{num(px)}" y1="{num(bottom)}" x2="{num(px)}" '
                       f'y2="{num(bottom + 4)}" stroke="{AXIS}"/>')
            if label:
                out.append(text(px + 3, bottom + 13, label, anchor="end", rotate=-30)
                           if rotate else text(px, bottom + 14, label, anchor="middle"))
        out.append(f'<path d="M{num(left)},{num(self.top)}V{num(bottom)}H{num(right)}" '
                   f'fill="none" stroke="{AXIS}"/>')
        if ylabel:
            out.append(text(14, self.top + self.height / 2, ylabel, anchor="middle",
                            rotate=-90))
        if xlabel:
            drop = 64 if rotate else 30
            out.append(text(left + self.width / 2, bottom + drop, xlabel, anchor="middle"))
        return out


def legend(x: float, y: float, entries: Sequence[tuple[str, str, str, bool]]) -> list[str]:
    """Rows of (label, colour, marker or "", with a line) from (x, y) down."""
    out = []
    for i, (label, colour, marker, line) in enumerate(entries):
        cy = y + i * LINE_H
        if line:
            out.append(polyline([(x, cy), (x + 18, cy)], colour))
        if marker:
            out.append(markers([(x + 9, cy)], marker, 6, colour))
        out.append(text(x + 24, cy + 3, label, size=8))
    return out


def legend_width(labels: Sequence[str]) -> float:
    return 30 + max((width_of(label, 8) for label in labels), default=0)


def legend_bottom(top: float, rows: int) -> float:
    return top + rows * LINE_H + 4


def document(width: float, height: float, prefix: str, title: str, body: Sequence[str],
             clip: Panel | None = None) -> str:
    """The chart as one <svg>; `clip` bounds the data drawn (its group is `<g clip-path>`)."""
    head = (f'<svg role="img" aria-label="{esc(title)}" xmlns="http://www.w3.org/2000/svg" '
            f'width="{num(width)}pt" height="{num(height)}pt" '
            f'viewBox="0 0 {num(width)} {num(height)}" font-family="{FONT}">')
    defs = ""
    if clip is not None:
        defs = (f'<defs><clipPath id="{prefix}-area"><rect x="{num(clip.left - 6)}" '
                f'y="{num(clip.top - 6)}" width="{num(clip.width + 12)}" '
                f'height="{num(clip.height + 12)}"/></clipPath></defs>')
    return head + f"<title>{esc(title)}</title>" + defs + "".join(body) + "</svg>"

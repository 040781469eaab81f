"""The report's own SVG charts (harness/readers/report/svgchart.py, plots.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.readers.report import svgchart
from harness.readers.report.plots import render_plots

NS = "{http://www.w3.org/2000/svg}"


def test_ticks_are_round_and_cover_the_range() -> None:
    assert svgchart.ticks(0, 1.12) == [0, 0.25, 0.5, 0.75, 1.0]
    assert svgchart.ticks(0, 364, 9) == [0, 50, 100, 150, 200, 250, 300, 350]
    assert svgchart.ticks(-3.4, 1.4) == [-3, -2, -1, 0, 1]
    assert svgchart.ticks(5, 5) == [5]  # no range: one tick, never a loop


def test_a_year_of_nights_is_one_readable_chart_per_figure() -> None:
    nights = [f"n{i:03d}" for i in range(365)]
    trends = {f"control-{c:02d}": [{"duration_s": 1.0 + c + (i % 7) / 10,
                                    "status": "refused" if i % 5 == 0 else "accepted"}
                                   for i in range(365)] for c in range(20)}
    plots = render_plots(nights, trends, [("duration_s", "duration", "s")])
    assert [t for t, _ in plots] == ["status per night", "duration"]
    for _, svg in plots:
        root = ET.fromstring(svg)
        labels = [t.text for t in root.iter(f"{NS}text")]
        assert 5 <= sum(1 for x in labels if x in nights) <= 10  # x labels never overlap
        assert "night (UTC start)" in labels and "control-19" in labels  # axis, legend
    duration = ET.fromstring(plots[1][1])
    assert len(list(duration.iter(f"{NS}polyline"))) >= 20  # one line per control
    assert duration.find(f"{NS}defs/{NS}clipPath").get("id") == "p1-area"


def test_a_circle_marker_is_round() -> None:
    d = svgchart.markers([(10, 10)], "o", 7.5, "#000")
    assert "a3.8,3.8 0 1 0 7.6,0" in d  # the radius is half the chord exactly: no bulge

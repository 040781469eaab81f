"""One run's telemetry plot for the morning report (harness/readers/report/runplots.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from harness.measure.telemetry import quantities as q
from harness.measure.telemetry.samples import Point
from harness.readers.report.runplots import cpu_percent, series, telemetry_svg


def pts(n: int) -> list[Point]:
    return [Point(float(t), 1000.0 + t, {"container": {q.CPU_S: 0.5 * t,
                                                       q.MEMORY_BYTES: float(t << 20)},
                                         "gpu0": {q.POWER_W: 100.0 + (300 if t == 77 else 0)}})
            for t in range(n)]


def test_series_thin_to_slice_maxima_and_keep_a_short_peak() -> None:
    got = series(pts(1000), max_points=50)
    power = got["gpu0"][q.POWER_W]
    assert len(power) == 50 and max(v for _, v in power) == 400.0  # the one-sample peak
    assert got["container"][q.CPU_S][0] == [1.0, 50.0]  # 0.5 s of CPU per second: 50 %
    assert len(series(pts(10))["container"][q.MEMORY_BYTES]) == 10


def test_cpu_percent_skips_what_is_not_an_interval() -> None:
    assert cpu_percent([(0.0, 1.0), (1.0, 2.0), (1.0, 3.0), (2.0, 2.5)]) == [(1.0, 100.0)]


def test_the_plot_has_a_panel_per_figure_with_units() -> None:
    svg = telemetry_svg(series(pts(20)), "r1", "run x: telemetry")
    assert svg is not None and svg.startswith('<svg role="img" aria-label="run x: telemetry"')
    assert all(i.startswith("r1-") for i in re.findall(r'\bid="([^"]*)"', svg))  # no collisions
    texts = [t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
    assert {"memory (MiB)", "CPU (% of one core)", "GPU power (W)", "container", "gpu0",
            "seconds since the container started"} <= set(texts)  # axes with units, legend
    assert telemetry_svg({}, "r2", "none") is None
    forged = {"gpu0": {q.POWER_W: [["1", 2], [1, float("nan")], "x"]}, "c": "y", 3: {}}
    assert telemetry_svg(forged, "r3", "forged") is None  # nothing plottable in it


def test_a_name_with_dollars_is_drawn_as_text_never_parsed_as_math() -> None:
    """mathtext raises on `$\\bad{$`: one such name would stop the whole morning page."""
    hostile = {r"$\frac{a}{$": {q.MEMORY_BYTES: [[0, 1], [1, 2]]},
               r"$\undefined$": {q.MEMORY_BYTES: [[0, 1], [1, 2]]}}
    svg = telemetry_svg(hostile, "m1", r"run $\bad{$: telemetry")
    assert svg is not None and "<svg" in svg

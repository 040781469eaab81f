"""The run's own figures, compared between two runs in the regression judge's names, units
and directions (`perflog.figures`, `comparable.DIRECTIONS`, its effect floor): the first
topic `harness diff` prints, because these are the figures a regression is called on.

Pure: every value comes from a run folder's record and is hostile; a figure is a finite
number or None."""

from __future__ import annotations

import math
from typing import Any

from harness.base.shapes import dict_or_empty
from harness.judge.regression import MIN_EFFECT, Worse
from harness.measure.telemetry import quantities

MAX_TELEMETRY = 48  # telemetry peaks and means compared (a hostile block may name thousands)
TELEMETRY_STATS = ("peak", "mean")
# How a figure compares, changes first: the order the figures topic lists them in.
CHANGES = ("moved", "only in a", "only in b", "within", "same", "not recorded")


def run_figures(record: Any, metrics_doc: Any) -> dict[str, float | int | None]:
    """Pure: a run's figures by name, None where it recorded none: the regression judge's
    (`perflog.figures`: times, lock, engine log, telemetry) and each telemetry source's
    peak and mean (`<source>.<quantity>.<peak|mean>`) of the quantities the sampler knows
    (a running total's peak only)."""
    from harness.measure import perflog  # loads the config schema: only figures need it (show)

    found = perflog.figures(dict_or_empty(record), dict_or_empty(metrics_doc))
    block = dict_or_empty(dict_or_empty(dict_or_empty(record).get("telemetry")).get("figures"))
    named = [(str(source), q, dict_or_empty(fig)) for source, values in block.items()
             if isinstance(source, str) and len(source) <= 64
             for q, fig in sorted(dict_or_empty(values).items()) if q in quantities.UNITS]
    for source, q, fig in sorted(named)[:MAX_TELEMETRY]:
        if (source, q) == ("container", quantities.MEMORY_PEAK_BYTES):
            continue  # its peak is memory_peak_bytes; the mean of a running peak is nothing
        for stat in TELEMETRY_STATS[:1] if q in quantities.CUMULATIVE else TELEMETRY_STATS:
            found[f"{source}.{q}.{stat}"] = perflog.number(fig.get(stat))
    return found


def figure_unit(name: str) -> str:
    """The unit a figure is in: the perf log's, or the telemetry quantity's."""
    from harness.measure import perflog

    parts = name.split(".")
    return quantities.UNITS.get(parts[1], "") if len(parts) == 3 else perflog.unit(name)


def compare_figure(name: str, a: float | int | None, b: float | int | None) -> dict:
    """Pure: one figure of two runs: `change` (one of CHANGES: `moved` by the regression
    judge's effect floor or more, or from zero; `within` it), `shift` (b / a - 1), and `way`
    (`worse` or `better`, where the judge knows which way the figure gets worse)."""
    from harness.judge.comparable import DIRECTIONS  # loads the engine client (show: never)

    worse = DIRECTIONS.get(name)
    row = {"figure": name, "a": a, "b": b, "unit": figure_unit(name),
           "worse": None if worse is None else str(worse), "shift": None, "way": None}
    if a is None or b is None:
        change = "not recorded" if a is None and b is None else (
            "only in a" if b is None else "only in b")
        return {**row, "change": change}
    if a == b:
        return {**row, "change": "same"}
    shift = b / a - 1 if a else None
    shift = shift if shift is None or math.isfinite(shift) else None
    way = None if worse is None else ("worse" if (b > a) == (worse == Worse.HIGHER)
                                      else "better")
    moved = shift is None or abs(shift) >= MIN_EFFECT
    return {**row, "change": "moved" if moved else "within", "shift": shift, "way": way}


def figures_topic(a: dict, b: dict) -> dict:
    """Pure: every figure either run has a name for, changes first (CHANGES order, then the
    judge's table order); `same` False when one moved or only one run recorded it, None when
    neither run recorded any."""
    fa, fb = (run_figures(s.get("record"), s.get("metrics")) for s in (a, b))
    names = list(dict.fromkeys([*fa, *fb]))
    rows = sorted((compare_figure(n, fa.get(n), fb.get(n)) for n in names),
                  key=lambda r: CHANGES.index(r["change"]))
    changes = {r["change"] for r in rows}
    same = False if changes & {"moved", "only in a", "only in b"} else (
        None if changes <= {"not recorded"} else True)
    return {"same": same, "min_effect": MIN_EFFECT, "figures": rows}

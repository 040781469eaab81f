"""The night's regressions as the morning report shows them: only the confirmed ones alert.

A regression its confirmation rerun did not confirm, or that no rerun answered, is listed
as unconfirmed with why (a one-off: no alert). Every value comes from evidence and is
normalised: inert text, finite numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.shapes import dict_or_empty
from harness.judge.regression import causes
from harness.measure import perflog
from harness.readers.report.inert import inert

FIGURES = ("p_value", "shift", "baseline_median", "recent_median", "baseline", "recent")


def _text(value: Any) -> str | None:
    return inert(value, 200) if isinstance(value, str) and value else None


def _figures(call: Mapping[str, Any]) -> dict:
    return {name: perflog.number(call.get(name)) for name in FIGURES}


def _confirmed(doc: Mapping[str, Any], control: str) -> list[tuple[bool, dict]]:
    """(confirmed?, item) for each figure a rerun's addendum answers for its original."""
    confirms = dict_or_empty(doc.get("confirms"))
    figures, calls = dict_or_empty(confirms.get("figures")), dict_or_empty(doc.get("figures"))
    if not figures:
        return []
    # here, not at the top: it imports the Docker SDK, which a report of no rerun never needs
    from harness.judge.comparable import Confirmation

    out = []
    for name, found in sorted(figures.items()):
        found = dict_or_empty(found)
        item = {"control": control, "figure": inert(name, 64),
                "run_id": _text(confirms.get("run_id")), "rerun_id": _text(doc.get("run_id")),
                **_figures(dict_or_empty(calls.get(name))),
                "alone": _figures(dict_or_empty(found.get("alone"))),
                "rerun_alone": _figures(dict_or_empty(found.get("rerun_alone"))), "why": None}
        out.append((found.get("confirmation") == Confirmation.CONFIRMED, item))
    return out


def _unanswered(doc: Mapping[str, Any], control: str, answered: set[tuple]) -> list[dict]:
    """An original's regression calls no rerun's addendum answers, with why."""
    calls = dict_or_empty(doc.get("figures"))
    run_id = _text(doc.get("run_id"))
    rerun = dict_or_empty(doc.get("rerun"))
    why = _text(rerun.get("why")) if rerun.get("scheduled") is not True else \
        "its confirmation rerun was scheduled and not sealed accepted"
    out = []
    for name in doc.get("regressions") if isinstance(doc.get("regressions"), list) else []:
        if not isinstance(name, str) or (run_id, name) in answered:
            continue
        call = _figures(dict_or_empty(calls.get(name)))
        out.append({"control": control, "figure": inert(name, 64), "run_id": run_id,
                    "rerun_id": None, **call, "alone": call, "rerun_alone": None, "why": why})
    return out


def regression_lists(records: Sequence[Mapping[str, Any]]) -> tuple[list[dict], list[dict]]:
    """(regressions, unconfirmed) of a night's run records, in the order of the runs."""
    confirmed: list[dict] = []
    unconfirmed: list[dict] = []
    answered: set[tuple] = set()
    docs = [dict_or_empty(r.get("regression")) for r in records]
    for doc in docs:
        control = _text(doc.get("control")) or "?"
        for yes, item in _confirmed(doc, control):
            answered.add((item["run_id"], item["figure"]))
            (confirmed if yes else unconfirmed).append(item)
    for doc in docs:
        if doc and not doc.get("confirms"):
            unconfirmed += _unanswered(doc, _text(doc.get("control")) or "?", answered)
    return _together(confirmed), _together(unconfirmed, confirmed)


def _together(items: list[dict], also: Sequence[Mapping[str, Any]] = ()) -> list[dict]:
    """`items` less each figure that moved with another called on its run here or in `also`
    (`lock_hold_s` with `duration_s`): named on that one as `moved_with` when it is in
    `items` too, never listed as a regression of its own."""
    figures: dict[Any, list[str]] = {}
    for item in [*items, *also]:
        figures.setdefault(item["run_id"], []).append(item["figure"])
    kept = {run: causes(names) for run, names in figures.items()}
    own = {(item["run_id"], item["figure"]) for item in items}
    return [{**item, "moved_with": [m for m in kept[item["run_id"]][item["figure"]]
                                    if (item["run_id"], m) in own]}
            for item in items if item["figure"] in kept[item["run_id"]]]


def _count(value: Any) -> int:
    found = perflog.number(value)
    return int(found) if found is not None and found >= 0 else 0


def baseline_notes(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Each call whose baseline skipped junk (folders named like runs of its control that are none:
    counted by kind) or left folders unexamined at a cap, in the order of the runs: a baseline
    pushed short, and so a call of `insufficient data`, is said, not silent."""
    out = []
    for r in records:
        doc = dict_or_empty(r.get("regression"))
        skipped = {inert(k, 64): _count(v)
                   for k, v in sorted(dict_or_empty(doc.get("skipped")).items()) if _count(v)}
        unexamined, stopped = _count(doc.get("unexamined")), _text(doc.get("stopped"))
        if not (skipped or unexamined or stopped):
            continue
        base = doc.get("baseline")
        out.append({"control": _text(doc.get("control")) or "?",
                    "run_id": _text(doc.get("run_id")),
                    "baseline": len(base) if isinstance(base, list) else 0,
                    "skipped": skipped, "unexamined": unexamined, "stopped": stopped})
    return out


def _pct(shift: float | None) -> str:
    return "?" if shift is None else f"{shift:+.1%}"


def _p(p: float | None) -> str:
    return "?" if p is None else f"{p:.3f}"


def regression_lines(summary: Mapping[str, Any]) -> list[str]:
    """The Markdown section (its text still to be escaped by the caller's `md`): each
    confirmed regression naming both runs, each unconfirmed call as a one-off."""
    lines: list[str] = []
    for r in summary.get("regressions") or []:
        moved = r.get("moved_with") or []
        lines.append(f"REGRESSION {r['control']} {r['figure']}: median {_pct(r['shift'])} "
                     f"(p={_p(r['p_value'])}, {r['recent']} recent against {r['baseline']} "
                     f"earlier runs), run {r['run_id']} confirmed by its rerun {r['rerun_id']}"
                     + (f"; {', '.join(moved)} moved with it" if moved else ""))
    for r in summary.get("unconfirmed") or []:
        again = r.get("rerun_alone") or {}
        then = (f"its rerun {r['rerun_id']} did not confirm it (the rerun alone: median "
                f"{_pct(again.get('shift'))}, p={_p(again.get('p_value'))}; with the run: "
                f"p={_p(r['p_value'])})" if r["rerun_id"] else
                f"not confirmed: {r['why'] or 'no rerun'}")
        lines.append(f"one-off {r['control']} {r['figure']}: run {r['run_id']} was called "
                     f"{_pct(r['alone']['shift'])} (p={_p(r['alone']['p_value'])}); {then}; "
                     "no alert")
    for n in summary.get("baselines") or []:
        kinds = ", ".join(f"{count} {kind}" for kind, count in n["skipped"].items())
        junk = sum(n["skipped"].values())
        said = [f"{junk} folders named like its runs skipped ({kinds})"] if junk else []
        if n["unexamined"] or n["stopped"]:
            said.append(f"{n['unexamined']} not examined: {n['stopped'] or 'a cap'}")
        lines.append(f"baseline {n['control']}: run {n['run_id']} compared with "
                     f"{n['baseline']} earlier runs; {'; '.join(said)}")
    return lines

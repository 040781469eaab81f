"""The night's verdict on its figures, said after its controls' headline: the regressions
its reruns confirmed, that none was found, or that none could be judged and on how few
earlier runs. Pure, from summary.json's data, so the night's end, `report`, `status` and
the hook say the same words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.plural import counted
from harness.base.states import Status
from harness.judge.regression import MIN_BASELINE, Movement
from harness.readers.report.inert import inert

SEP = " · "  # between the controls' headline and the verdict
MAX_NAMED = 3  # regressions named in the line; the rest counted
JUDGED = {str(m) for m in Movement if m != Movement.INSUFFICIENT}


def call_state(doc: Any) -> dict | None:
    """What a run's sealed regression call rests on: whether it judged any figure, how many
    earlier runs it compared with and how many a call needs; None when no call was sealed."""
    if not isinstance(doc, dict):
        return None
    figures = doc.get("figures") if isinstance(doc.get("figures"), dict) else {}
    base, method = doc.get("baseline"), doc.get("method")
    needed = method.get("min_baseline") if isinstance(method, dict) else None
    return {"judged": any(isinstance(c, dict) and c.get("movement") in JUDGED
                          for c in figures.values()),
            "baseline": len(base) if isinstance(base, list) else 0,
            "needed": needed if type(needed) is int and 0 < needed <= 10**6 else MIN_BASELINE}


def _pct(shift: Any) -> str:
    return f"{shift * 100:+.0f} %" if isinstance(shift, float | int) else "?"


def _p(p: Any) -> str:
    return "?" if not isinstance(p, float | int) else "<0.001" if p < 0.001 else f"={p:.3f}"


def _named(r: Mapping[str, Any]) -> str:
    """`ux-step duration_s +85 % (p=0.004; lock_hold_s moved with it)`."""
    moved = r.get("moved_with") or []
    with_it = f"; {', '.join(moved)} moved with it" if moved else ""
    return (f"{inert(r.get('control'), 64)} {inert(r.get('figure'), 64)} {_pct(r.get('shift'))}"
            f" (p{_p(r.get('p_value'))}{with_it})")


def _not_judged(left: Sequence[Mapping[str, Any]]) -> str:
    """`3 of 9 earlier runs`, `no call sealed`, `2 controls with 0–3 of 9 earlier runs, 1 control
    with no call sealed`."""
    called = sorted(n["baseline"] for n in left if n["baseline"] is not None)

    def who(n: int) -> str:
        return "" if len(left) == 1 else f"{counted(n, 'control')} with "

    parts = []
    if called:
        lo, hi = called[0], called[-1]
        needed = max(n["needed"] for n in left if n["baseline"] is not None)
        parts.append(f"{who(len(called))}{lo if lo == hi else f'{lo}–{hi}'} of {needed} "
                     "earlier runs")
    if uncalled := len(left) - len(called):
        parts.append(f"{who(uncalled)}no call sealed")
    return ", ".join(parts)


def verdict(runs: Sequence[Mapping[str, Any]], confirmed: Sequence[Mapping[str, Any]],
            unconfirmed: Sequence[Mapping[str, Any]]) -> dict:
    """The verdict's line and what it counts: each control's newest attempt that ended
    accepted is judged when its sealed call judged a figure; "no regression" is said only
    of judged ones."""
    finals = [e for e in runs if e.get("status") == Status.ACCEPTED and not e.get("superseded_by")]
    calls = [(e, e.get("call") or {}) for e in finals]
    judged = sum(1 for _, c in calls if c.get("judged"))
    left = [{"control": e.get("control"), "run_id": e.get("run_id"),
             "baseline": c.get("baseline"), "needed": c.get("needed") or MIN_BASELINE}
            for e, c in calls if not c.get("judged")]
    parts = []
    if confirmed:
        more = len(confirmed) - MAX_NAMED
        parts.append(f"{counted(len(confirmed), 'regression')} confirmed: "
                     + ", ".join(_named(r) for r in confirmed[:MAX_NAMED])
                     + (f" and {more} more" if more > 0 else ""))
    if unconfirmed:
        calls_text = f"{counted(len(unconfirmed), 'call')} unconfirmed"
        parts.append(calls_text if confirmed else f"no regression confirmed ({calls_text})")
    elif judged and not confirmed:
        parts.append("no regression" + (f" in {counted(judged, 'control')} judged"
                                        if left else ""))
    if left:
        parts.append(("not judged: " if parts else "regressions: not judged: ")
                     + _not_judged(left))
    return {"line": "; ".join(parts),  # empty when no control ended accepted: none to judge
            "confirmed": len(confirmed), "unconfirmed": len(unconfirmed), "judged": judged,
            "not_judged": left}

"""The controls a night left unrun, with why: read from its journal rows, for every
rendering of the summary and the hook.

A slot's newest attempt still `planned` with a reason was left by a walk that ended
before it; a later start that runs the slot clears the reason, so a resumed night no
longer lists it. Pure; every value is read as hostile (inert text, typed numbers)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.slots import NotExecuted, Slot
from harness.base.states import State
from harness.readers.report.inert import inert

MAX_WHY = 400


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def not_executed(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Each slot whose newest attempt is planned with a reason, in plan order, as
    {"control", "plan_index", "repeat_index", "label", "why"}."""
    latest: dict[int, Mapping[str, Any]] = {}
    for record in records:
        row = record.get("row")
        if not isinstance(row, Mapping):
            continue
        index, attempt = _int(row.get("plan_index")), _int(row.get("attempt"))
        if index is None or attempt is None:
            continue
        if index not in latest or attempt > (_int(latest[index].get("attempt")) or 0):
            latest[index] = row
    controls = {i: inert(r.get("control"), 200) for i, r in latest.items()}
    counts = Counter(controls.values())
    out = []
    for index, row in sorted(latest.items()):
        reason = row.get("reason")
        if row.get("state") != State.PLANNED or not isinstance(reason, str) or not reason:
            continue
        control = controls[index]
        slot = Slot(index, control, _int(row.get("repeat_index")) or 0, counts[control] > 1)
        out.append(NotExecuted(slot, inert(reason, MAX_WHY)).as_dict())
    return out


def not_executed_lines(summary: Mapping[str, Any]) -> list[str]:
    """`kv-auto (repeat 2): stop_policy stop-on-refusal after a was refused (RULE)` for
    each slot the summary names (its text still to be escaped by the caller's format)."""
    found = summary.get("not_executed")
    if not isinstance(found, list):
        return []
    return [f"{inert(e.get('label'), 300)}: {inert(e.get('why'), MAX_WHY)}"
            for e in found if isinstance(e, Mapping)]

"""The morning headline: how the night's CONTROLS ended, not how many attempts it took.

Counting rows would say "3 accepted, 1 refused" when all three controls ended accepted
after a rerun. A rerun joins its original's slot (by plan index, `rerun_of`, or the rerun
index's links) even days later; the newest attempt speaks for its control."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.plural import noun
from harness.base.states import Status

RERUN = "rerun"
RETRY = "retry"
CONFIRM = "confirm"
# how the attempts after the first are counted, in this order
AFTER = {RERUN: "{} after rerun", RETRY: "{} after retry", CONFIRM: "{} rerun to confirm"}


def _slots(entries: Sequence[Mapping[str, Any]], links: Mapping[str, str]) -> list[list[int]]:
    """Indices of `entries` grouped by slot, each group oldest attempt first, groups in
    the order of their first entry. Union-find over plan index and rerun links."""
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    by_plan: dict[int, int] = {}
    by_run: dict[str, int] = {}
    for i, e in enumerate(entries):
        if isinstance(e.get("plan_index"), int):
            join(i, by_plan.setdefault(e["plan_index"], i))
        if e.get("run_id"):
            by_run.setdefault(e["run_id"], i)
    for i, e in enumerate(entries):
        original = e.get("rerun_of") or links.get(e.get("run_id") or "")
        if original in by_run:
            join(i, by_run[original])
    groups: dict[int, list[int]] = {}
    for i in range(len(entries)):
        groups.setdefault(find(i), []).append(i)

    def order(i: int) -> tuple[int, int]:
        attempt = entries[i].get("attempt")
        return (attempt if isinstance(attempt, int) else 0, i)

    return sorted((sorted(g, key=order) for g in groups.values()), key=min)


def _unrun_rerun(entry: Mapping[str, Any]) -> bool:
    """A rerun row that never started (a night's confirmation rerun the deadline left
    planned): it says nothing of its slot, so the attempt before it speaks."""
    return entry.get("origin") == RERUN and not entry.get("run_id")


def _how(entry: Mapping[str, Any], before: Mapping[str, Any]) -> str:
    """How an attempt after the first came to be: a retry, a rerun to confirm (an accepted
    attempt is rerun only to measure it again: a night's regression call), or a rerun after
    an attempt that did not end accepted."""
    if entry.get("origin") == RETRY:
        return RETRY
    return CONFIRM if before.get("status") == Status.ACCEPTED else RERUN


def _successor(entries: Sequence[Mapping[str, Any]], group: list[int], pos: int) -> str:
    """What supersedes attempt `group[pos]`: the attempt that names it as its original,
    else the next one in the slot; its run id, or `attempt N` before it has one."""
    mine = entries[group[pos]].get("run_id")
    later = group[pos + 1:]
    named = [i for i in later if mine and entries[i].get("rerun_of") == mine]
    nxt = entries[(named or later)[0]]
    return nxt.get("run_id") or f"attempt {nxt.get('attempt') or '?'}"


def tally(entries: Sequence[Mapping[str, Any]],
          links: Mapping[str, str] | None = None) -> dict:
    """Per slot its final attempt, and the counts the headline says."""
    slots = _slots(entries, links or {})
    final: Counter[str] = Counter()
    after: dict[str, Counter[str]] = {}
    superseded: dict[int, str] = {}
    for group in slots:
        group = [i for i in group if not _unrun_rerun(entries[i])] or group
        last = entries[group[-1]]
        status = str(last.get("status") or "unknown")
        final[status] += 1
        if len(group) > 1:
            after.setdefault(status, Counter())[_how(last, entries[group[-2]])] += 1
        for pos in range(len(group) - 1):
            superseded[group[pos]] = _successor(entries, group, pos)
    attempts = Counter(str(e.get("status") or "unknown") for e in entries)
    return {"controls": len(slots), "final": _accepted_first(final),
            "after": after, "attempts": _accepted_first(attempts),
            "superseded": superseded}


def _accepted_first(counts: dict[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (kv[0] != Status.ACCEPTED, kv[0])))


def _after_text(kinds: Mapping[str, int] | None) -> str:
    """` (1 after rerun, 1 rerun to confirm)`, or nothing when every control ran once."""
    if not kinds:
        return ""
    parts = [form.format(kinds[k]) for k, form in AFTER.items() if kinds.get(k)]
    return f" ({', '.join(parts)})" if parts else ""


def headline(t: Mapping[str, Any]) -> str:
    """`3/3 controls accepted (1 after rerun)`. Status words come from the entries (already
    inert text)."""
    total = t["controls"]
    if not total:
        return "no controls"
    accepted = t["final"].get(Status.ACCEPTED, 0)
    text = (f"{accepted}/{total} {noun(total, 'control')} accepted"
            + _after_text(t["after"].get(Status.ACCEPTED)))
    rest = [f"{n} {s}{_after_text(t['after'].get(s))}" for s, n in t["final"].items()
            if s != Status.ACCEPTED]
    return "; ".join([text, ", ".join(rest)]) if rest else text


def attempts_text(t: Mapping[str, Any]) -> str:
    """`3 accepted, 1 refused (1 superseded)`: what the rows say, for those who count runs."""
    counts = ", ".join(f"{c} {s}" for s, c in t["attempts"].items())
    sup = len(t["superseded"])
    return (counts + (f" ({sup} superseded)" if sup else "")) if counts else "no runs"

"""A journal row (one attempt at one planned slot) and how rows group. Pure.

A row's state is its sealed folder's status; the newest attempt of a slot decides it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.base.states import State

RERUN = "rerun"  # the origin of a rerun's row (schema.ORIGINS): an operator's or a night's
RETRY = "retry"  # a retry's row: the night's new attempt after an interruption


@dataclass(frozen=True)
class Row:
    """One attempt at one planned slot of the night."""

    id: int
    plan_index: int
    control: str
    repeat_index: int
    attempt: int
    state: State
    run_id: str | None
    run_dir: str | None
    reason: str | None  # the outcome's reasons as people read them; never decided on
    rerun_of: int | None  # row id of the attempt this one repeats
    origin: str  # plan | retry | rerun
    link_reason: str | None  # why this attempt exists (operator reason, "retry after interrupted")
    updated: str
    rules: tuple[str, ...] = ()  # the rule ids of its outcome's reasons
    exit_class: int | None = None  # its outcome's exit class: 0, 1 or 3 (None: no outcome)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def latest_attempts(rows: Iterable[Row]) -> dict[int, Row]:
    """The newest attempt of each plan slot: the one whose state decides the slot."""
    latest: dict[int, Row] = {}
    for row in rows:
        cur = latest.get(row.plan_index)
        if cur is None or row.attempt > cur.attempt:
            latest[row.plan_index] = row
    return latest


def chain_of(rows: Sequence[Row], run_id: str) -> list[Row]:
    """Every attempt linked to `run_id` by rerun_of, both ways, oldest first. Pure."""
    by_id = {r.id: r for r in rows}
    start = next((r for r in rows if r.run_id == run_id), None)
    if start is None:
        return []
    root, seen = start, {start.id}
    while root.rerun_of is not None and root.rerun_of in by_id and root.rerun_of not in seen:
        root = by_id[root.rerun_of]
        seen.add(root.id)
    children: dict[int, list[Row]] = {}
    for r in by_id.values():
        if r.rerun_of is not None:
            children.setdefault(r.rerun_of, []).append(r)
    out, todo, visited = [], [root], set()
    while todo:
        r = todo.pop(0)
        if r.id in visited:
            continue
        visited.add(r.id)
        out.append(r)
        todo.extend(sorted(children.get(r.id, []), key=lambda c: c.id))
    return sorted(out, key=lambda r: (r.attempt, r.id))

"""The night's rules, as pure functions over journal rows: legal moves and what runs next.

Kept apart from the SQLite shell so every rule is tested without a database: which state
changes are legal, what a fresh start does with rows left by a dead harness, and which
run the night loop launches next. A sealed, refused or failed run is never chosen again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.errors import InvalidInput

STATES = ("planned", "running", "sealed", "refused", "failed", "interrupted", "deferred")
TERMINAL = frozenset({"sealed", "refused", "failed"})  # never run again, never changed again

# (state, event) -> new state. Anything absent is illegal.
TRANSITIONS: dict[tuple[str, str], str] = {
    ("planned", "start"): "running",
    ("planned", "defer"): "deferred",  # the doctor failed: nothing was launched
    ("planned", "refuse"): "refused",  # refused before launch (e.g. image Id differs from lock)
    ("planned", "fail"): "failed",  # failed before launch (e.g. preflight error)
    ("running", "seal"): "sealed",
    ("running", "refuse"): "refused",
    ("running", "fail"): "failed",
    ("running", "interrupt"): "interrupted",
    ("deferred", "requeue"): "planned",  # a later start of the night tries the host again
}
EVENTS = tuple(sorted({event for _, event in TRANSITIONS}))


class IllegalTransition(InvalidInput):
    """A state change the rules forbid (a bug in the caller, or a second writer)."""


def transition(state: str, event: str) -> str:
    """The state after `event`, or IllegalTransition. Pure: the one place the rules live."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(f"journal: cannot {event!r} a run that is {state!r}") from None


@dataclass(frozen=True)
class Row:
    """One attempt at one planned slot of the night."""

    id: int
    plan_index: int
    control: str
    repeat_index: int
    attempt: int
    state: str
    run_id: str | None
    run_dir: str | None
    reason: str | None
    rerun_of: int | None  # row id of the attempt this one repeats
    origin: str  # plan | retry | rerun
    link_reason: str | None  # why this attempt exists (operator reason, "retry after interrupted")
    updated: str

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class RetryPolicy:
    """How often one plan slot may be attempted in total; 1 means an interruption is final."""

    max_attempts: int = 1

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InvalidInput("retry policy: max_attempts must be at least 1")


@dataclass(frozen=True)
class Action:
    """What the night does next: interrupt, retry, launch, or done (row is None)."""

    kind: str
    row: Row | None = None


def latest_attempts(rows: Iterable[Row]) -> dict[int, Row]:
    """The newest attempt of each plan slot: the one whose state decides the slot."""
    latest: dict[int, Row] = {}
    for row in rows:
        cur = latest.get(row.plan_index)
        if cur is None or row.attempt > cur.attempt:
            latest[row.plan_index] = row
    return latest


def resume_steps(rows: Sequence[Row]) -> list[Action]:
    """What a fresh start of a night does first. Pure.

    A `running` row found at start means the harness died mid-run: it becomes
    `interrupted`. A `deferred` row goes back to `planned`, because the host may have been
    repaired since. Call this only while holding the night's lock, or a live night's
    running row would be mistaken for a dead one.
    """
    steps = [Action("interrupt", r) for r in rows if r.state == "running"]
    steps += [Action("requeue", r) for r in rows if r.state == "deferred"]
    return steps


def next_action(rows: Sequence[Row], policy: RetryPolicy) -> Action:
    """The one next step of the night loop. Pure.

    Order: a stale `running` row is interrupted first; then the earliest interrupted slot
    that the policy lets retry gets a new attempt; then the earliest `planned` row is
    launched; otherwise the night is done. Sealed, refused and failed rows are never
    chosen, and a slot whose newest attempt is terminal is never run again.
    """
    ordered = sorted(rows, key=lambda r: (r.plan_index, r.attempt))
    for row in ordered:
        if row.state == "running":
            return Action("interrupt", row)
    latest = latest_attempts(ordered)
    for plan_index in sorted(latest):
        row = latest[plan_index]
        if row.state == "interrupted" and row.attempt < policy.max_attempts:
            return Action("retry", row)
    for plan_index in sorted(latest):
        row = latest[plan_index]
        if row.state == "planned":
            return Action("launch", row)
    return Action("done")

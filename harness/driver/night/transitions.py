"""The night's rules, as pure functions over journal rows: legal moves and what runs next.

Kept apart from the SQLite shell so every rule is tested without a database: which state
changes are legal, what a fresh start does with rows left by a dead harness, and which
run the night loop launches next. The journal speaks the run's language: a finished row
is `accepted`, `refused`, `failed`, `timed-out` or `interrupted`, exactly the status its
sealed folder records (`harness.base.states.Status`); such a row is never chosen again
(an interrupted one only as a new, linked attempt when the retry policy allows).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.base.errors import InvalidInput
from harness.base.states import TERMINAL, State, Status
from harness.driver.policy import RetryPolicy, retry_allowed

__all__ = ["EVENTS", "TERMINAL", "TRANSITIONS", "IllegalTransition", "RetryPolicy", "Row",
           "Step", "chain_of", "judged_attempts", "latest_attempts", "next_step", "outcome_event",
           "resume_steps", "transition"]

# (state, event) -> new state. Anything absent is illegal.
TRANSITIONS: dict[tuple[State, str], State] = {
    (State.PLANNED, "start"): State.RUNNING,
    (State.PLANNED, "defer"): State.DEFERRED,  # the doctor failed: nothing was launched
    (State.PLANNED, "refuse"): State.REFUSED,  # refused before launch (image Id not the lock's)
    (State.PLANNED, "fail"): State.FAILED,  # failed before launch (e.g. preflight error)
    (State.RUNNING, "accept"): State.ACCEPTED,
    (State.RUNNING, "refuse"): State.REFUSED,
    (State.RUNNING, "fail"): State.FAILED,
    (State.RUNNING, "time-out"): State.TIMED_OUT,
    (State.RUNNING, "interrupt"): State.INTERRUPTED,
    (State.RUNNING, "slurm-job"): State.RUNNING,  # its Slurm job's id and token, after sbatch
    (State.RUNNING, "withdraw"): State.PLANNED,  # its Slurm job was cancelled before it ran
    (State.PLANNED, "leave"): State.PLANNED,  # the walk ended before it: why, in its reason
    (State.DEFERRED, "requeue"): State.PLANNED,  # a later start of the night tries again
}
EVENTS = tuple(sorted({event for _, event in TRANSITIONS}))

RERUN = "rerun"  # the origin of a rerun's row (schema.ORIGINS): an operator's or a night's

# A sealed folder's status -> the journal event that records it (the state is the status).
STATUS_EVENT = {Status.ACCEPTED: "accept", Status.REFUSED: "refuse", Status.FAILED: "fail",
                Status.TIMED_OUT: "time-out", Status.INTERRUPTED: "interrupt"}


class IllegalTransition(InvalidInput):
    """A state change the rules forbid (a bug in the caller, or a second writer)."""


def transition(state: State | str, event: str) -> State:
    """The state after `event`, or IllegalTransition. Pure: the one place the rules live."""
    try:
        return TRANSITIONS[(State(state), event)]
    except (KeyError, ValueError):
        raise IllegalTransition(f"journal: cannot {event!r} a run that is {state!r}") from None


def outcome_event(status: Status | str, text: str) -> tuple[str, str | None]:
    """(event, reason) recording a run that ended with `status`. Pure.

    An accepted run needs no reason; any other keeps the run's reasons (or its status when
    it gave none). A status the journal does not know is recorded `failed`, naming it."""
    text = text or str(status)
    if status == Status.ACCEPTED:
        return "accept", None
    if status in STATUS_EVENT:
        return STATUS_EVENT[Status(status)], text
    return "fail", f"{status}: {text}"


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


@dataclass(frozen=True)
class Step:
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


def resume_steps(rows: Sequence[Row]) -> list[Step]:
    """What a fresh start of a night does first. Pure.

    A `running` row found at start means the harness died mid-run: it becomes
    `interrupted`. A `deferred` row goes back to `planned`, because the host may have been
    repaired since. Call this only while holding the night's lock, or a live night's
    running row would be mistaken for a dead one.
    """
    steps = [Step("interrupt", r) for r in rows if r.state == State.RUNNING]
    steps += [Step("requeue", r) for r in rows if r.state == State.DEFERRED]
    return steps


def next_step(rows: Sequence[Row], policy: RetryPolicy) -> Step:
    """The one next step of the night loop. Pure.

    Order: a stale `running` row is interrupted first; then the earliest interrupted slot
    that the policy lets retry gets a new attempt; then the earliest `planned` row is
    launched, a rerun's (a night's confirmation rerun) only once no planned control is
    left; otherwise the night is done. Finished rows are never chosen, and a slot
    whose newest attempt is terminal is never run again.
    """
    ordered = sorted(rows, key=lambda r: (r.plan_index, r.attempt))
    for row in ordered:
        if row.state == State.RUNNING:
            return Step("interrupt", row)
    latest = latest_attempts(ordered)
    for plan_index in sorted(latest):
        row = latest[plan_index]
        if retry_allowed(policy, row.state, row.attempt):
            return Step("retry", row)
    planned = [latest[i] for i in sorted(latest) if latest[i].state == State.PLANNED]
    if planned:  # min keeps the first of equals: plan order among controls, among reruns
        return Step("launch", min(planned, key=lambda r: r.origin == RERUN))
    return Step("done")


def judged_attempts(rows: Iterable[Row]) -> dict[int, Row]:
    """The attempt of each slot that its outcome is judged by: the newest, except a rerun
    never started (a confirmation rerun the deadline left planned), which says nothing
    of the slot, so the attempt before it speaks. Pure."""
    started = [r for r in rows if not (r.origin == RERUN and r.state == State.PLANNED)]
    return latest_attempts(started)


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

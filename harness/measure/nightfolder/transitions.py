"""The journal's legal moves, pure, so every rule is tested without a database.

A finished row never moves again; an interrupted one is retried only as a new attempt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.base.errors import InvalidInput
from harness.base.states import State, Status
from harness.measure.nightfolder.rows import Row

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
    """(event, reason) recording a run that ended with `status`; an unknown status is `failed`."""
    text = text or str(status)
    if status == Status.ACCEPTED:
        return "accept", None
    if status in STATUS_EVENT:
        return STATUS_EVENT[Status(status)], text
    return "fail", f"{status}: {text}"


@dataclass(frozen=True)
class Step:
    """What the night does next: interrupt, requeue, retry, launch, or done (row is None)."""

    kind: str
    row: Row | None = None


def resume_steps(rows: Sequence[Row]) -> list[Step]:
    """What a fresh start does first, pure: a `running` row (its harness died) becomes
    `interrupted`; a `deferred` one `planned` (the host may be repaired). Call it only
    under the night lock, or a live night's running row would look dead."""
    steps = [Step("interrupt", r) for r in rows if r.state == State.RUNNING]
    steps += [Step("requeue", r) for r in rows if r.state == State.DEFERRED]
    return steps

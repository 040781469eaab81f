"""When a walk of the plan stops, and when an interrupted control is tried again. Pure,
and asked after every outcome whichever executor ran it, so `stop_policy` means one thing
for `run`, `night` and a Slurm night alike."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from harness.base.errors import InvalidInput
from harness.base.slots import NotExecuted, Slot
from harness.base.states import State, Status
from harness.base.stoprule import Stop, stops


class Why(StrEnum):
    """Why a walk of the plan ended (`ended.json`'s `why`, the night's last line)."""

    DONE = "done"
    DEADLINE = "deadline"
    STOP_POLICY = Stop.POLICY.value
    INTERRUPTED = Status.INTERRUPTED.value  # a signal, or a stop asked while sealing
    ENVIRONMENT = Stop.ENVIRONMENT.value  # a host fault: the next control meets the same host


# A walk that ended so is over: a later start of its night does not continue it.
ENDED_ON_PURPOSE = frozenset({Why.DONE, Why.DEADLINE, Why.STOP_POLICY})


class Ended(Protocol):
    """What the policy reads of an outcome (`harness.driver.plan.Outcome`)."""

    status: Status
    exit_code: int
    stop_requested: bool
    remote: bool


def stop_reason(policy: str, outcome: Ended) -> Why | None:
    """Why the walk stops after `outcome`, or None to go on. A signal or an environment
    fault stops every campaign; then `stop_policy` (`base.stoprule`, a Slurm host's rule
    too). A remote control interrupted (scancel, a lost node) stopped its host's run, not
    this walk: the policy and retry rule decide."""
    stopped = stops(policy, outcome.status, outcome.exit_code)  # an unknown policy raises
    if (outcome.status == Status.INTERRUPTED and not outcome.remote) or outcome.stop_requested:
        return Why.INTERRUPTED
    return None if stopped is None else Why(stopped.value)


@dataclass(frozen=True)
class RetryPolicy:
    """How often one plan slot may be attempted in total; 1 means an interruption is final."""

    max_attempts: int = 1

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InvalidInput("retry policy: max_attempts must be at least 1")

    @classmethod
    def extra(cls, interrupted: int) -> RetryPolicy:
        """From a campaign's `retry.interrupted`: that many attempts after the first."""
        return cls(max_attempts=1 + interrupted)


def retry_allowed(policy: RetryPolicy, state: State | str, attempt: int) -> bool:
    """Is this slot tried again? Only an interruption is (the host stopped it); a refused,
    failed or timed-out control would only repeat its verdict."""
    return state == State.INTERRUPTED and attempt < policy.max_attempts


@dataclass(frozen=True)
class StoppedAfter:
    """The outcome after which a walk stopped: its control, status and rule ids."""

    control: str
    status: Status
    rules: tuple[str, ...] = ()


def why_not_executed(why: Why | str, policy: str, after: StoppedAfter | None = None,
                     deadline: str | None = None) -> str:
    """Why the walk left the rest of its plan unrun, in one line (`after`: the outcome it
    stopped on; `deadline`: what set the deadline)."""
    rules = f" ({', '.join(after.rules)})" if after is not None and after.rules else ""
    if why == Why.STOP_POLICY:
        if after is None:
            return f"stop_policy {policy} stopped the campaign"
        return f"stop_policy {policy} after {after.control} was {after.status}{rules}"
    if why == Why.DEADLINE:
        if deadline is not None and deadline.startswith("window"):
            return f"{deadline} closed"
        return f"deadline {deadline} reached" if deadline else "deadline reached"
    if why == Why.INTERRUPTED:
        return str(Status.INTERRUPTED)
    if why == Why.ENVIRONMENT:
        return (f"environment fault after {after.control} was {after.status}{rules}"
                if after is not None else "environment fault")
    return f"the walk ended ({why})"


def not_executed(left: Iterable[Slot], why: Why | str, policy: str,
                 after: StoppedAfter | None = None,
                 deadline: str | None = None) -> tuple[NotExecuted, ...]:
    """Each slot left unrun by a walk that ended with `why`; none when it was done."""
    if why == Why.DONE:
        return ()
    text = why_not_executed(why, policy, after, deadline)
    return tuple(NotExecuted(s, text) for s in sorted(left, key=lambda s: s.plan_index))

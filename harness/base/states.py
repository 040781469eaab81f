"""The words runs, post-steps, stages and journal rows end in, each spelled once.

"Refused" is a run's `Status`, a post-step's `Verdict` and a stage's `StageResult`; each is
its own type so the code says which one it means. `StrEnum`s, so a member is its word in
JSON, SQLite and YAML, and a word read back is parsed with `Status(word)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from harness.base.errors import OK
from harness.base.reason import Reason, exit_class


class Status(StrEnum):
    ACCEPTED = "accepted"
    REFUSED = "refused"
    FAILED = "failed"  # the container itself failed (its exit, a kill for memory)
    TIMED_OUT = "timed-out"
    INTERRUPTED = "interrupted"  # the harness was stopped; a retry may run it again


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    REFUSED = "refused"


class StageResult(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    ERROR = "error"
    INTERRUPTED = "interrupted"


class State(StrEnum):
    PLANNED = "planned"
    RUNNING = "running"
    DEFERRED = "deferred"  # the doctor failed: nothing was launched; a later start retries
    ACCEPTED = Status.ACCEPTED.value
    REFUSED = Status.REFUSED.value
    FAILED = Status.FAILED.value
    TIMED_OUT = Status.TIMED_OUT.value
    INTERRUPTED = Status.INTERRUPTED.value

    @classmethod
    def of(cls, status: Status) -> State:
        """The journal state that records a sealed run's status (the same word)."""
        return cls(status.value)


STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
# Never run again, never changed again (an interrupted run may be retried as a new attempt).
TERMINAL: frozenset[Status] = frozenset(
    {Status.ACCEPTED, Status.REFUSED, Status.FAILED, Status.TIMED_OUT})


def exit_code(status: Status | str, reasons: Iterable[Reason]) -> int:
    """0 accepted; 3 when a reason says the host was at fault; else 1."""
    return OK if status == Status.ACCEPTED else exit_class(reasons)

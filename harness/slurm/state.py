"""A remote row's journal states, resume after `kill -9`, the submit window, the poll pace.
Pure: the SQLite journal and the Slurm calls are thin shells around these rules.

The states a row passes through when its control runs as a Slurm job:

    planned -> submitting -> submitted -> running -> awaiting-seal -> accepted | refused |
                                                                     failed | timed-out |
                                                                     interrupted

- `submitting` is committed *before* sbatch, with the job's token (its name): a controller
  killed between sbatch and the next commit finds the job by token instead of submitting
  it again (`resume_steps`).
- `submitted` is committed *after* sbatch, with the job id.
- `awaiting-seal`: Slurm says the job ended (done, cancelled, out of time, node lost).
  That is not the run's status: the host may still be stopping the container and sealing
  (a node set DOWN kept running and sealed 11 s after Slurm's NODE_FAIL). The row leaves
  this state from the sealed evidence (`on_evidence`), or after a grace period with no
  evidence as `interrupted` (`seal_overdue`), which the retry policy may try again with
  `--exclude` of that node (`retry_exclude`).
- Sealed evidence may also arrive while Slurm still says running (the seal comes before the
  job's exit), so `submitted` and `running` accept the evidence events too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.errors import InvalidInput
from harness.slurm.query import ENDED, Job, JobState

STATES = ("planned", "submitting", "submitted", "running", "awaiting-seal", "accepted",
          "refused", "failed", "timed-out", "interrupted")
SEALED = ("accepted", "refused", "failed", "timed-out", "interrupted")  # a run's statuses
TERMINAL = frozenset({"accepted", "refused", "failed", "timed-out"})  # interrupted: retryable
STATUS_EVENT = {"accepted": "accept", "refused": "refuse", "failed": "fail",
                "timed-out": "time-out", "interrupted": "interrupt"}
_LIVE = ("submitted", "running", "awaiting-seal")

TRANSITIONS: dict[tuple[str, str], str] = {
    ("planned", "submit"): "submitting",
    ("submitting", "submitted"): "submitted",  # sbatch gave a job id, or adopted by token
    ("submitting", "submit-failed"): "failed",  # sbatch refused it for good (bad partition)
    ("submitting", "withdraw"): "planned",  # stopping, and no job carries the token
    ("submitted", "start"): "running",
    ("submitted", "slurm-end"): "awaiting-seal",
    ("submitted", "withdraw"): "planned",  # we cancelled it while pending: it never ran
    ("running", "slurm-end"): "awaiting-seal",
    ("running", "requeued"): "submitted",  # a site requeued it despite --no-requeue
    ("awaiting-seal", "requeued"): "submitted",
    ("awaiting-seal", "withdraw"): "planned",  # ended with no node, after our scancel
    ("awaiting-seal", "seal-overdue"): "interrupted",  # no evidence within the grace
    **{(state, event): status for state in _LIVE for status, event in STATUS_EVENT.items()},
}
EVENTS = tuple(sorted({event for _, event in TRANSITIONS}))


class IllegalTransition(InvalidInput):
    """A state change the rules forbid (a bug in the caller, or a second writer)."""


def transition(state: str, event: str) -> str:
    """The state after `event`, or IllegalTransition. Pure: the one place the rules live."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(f"journal: cannot {event!r} a remote run that is "
                                f"{state!r}") from None


@dataclass(frozen=True)
class Remote:
    """What the rules need of one journal row whose control runs as a Slurm job."""

    row_id: int
    state: str
    token: str | None = None  # the job name, set with `submitting`
    job_id: str | None = None  # set with `submitted`
    node: str | None = None  # where Slurm last placed it
    since: float = 0.0  # when the row entered its state (epoch seconds)
    attempt: int = 1
    excluded: tuple[str, ...] = ()  # the --exclude this attempt was submitted with


def on_slurm(state: str, job: Job | None, *, we_cancelled: bool = False) -> str | None:
    """The event Slurm's answer means for a row in `state`, or None (nothing to record).

    Missing (`None`) or unknown answers never move a row: only time (`lost`) and the seal
    do. A job that ended without ever getting a node is `withdraw`n only when the
    controller cancelled it (stop-on-refusal, --until); otherwise it awaits the seal like
    any other, so an admin's scancel is retried by policy rather than forgotten."""
    if job is None or job.state == JobState.UNKNOWN:
        return None
    if state == "submitted":
        if job.state == JobState.RUNNING:
            return "start"
        if job.state in ENDED:
            return "withdraw" if we_cancelled and job.node is None else "slurm-end"
    elif state == "running":
        if job.state == JobState.PENDING:
            return "requeued"
        if job.state in ENDED:
            return "slurm-end"
    elif state == "awaiting-seal" and job.state == JobState.PENDING:
        return "requeued"
    return None


def on_evidence(state: str, status: str) -> str:
    """The event recording a sealed run's status; only a live remote row takes it."""
    if status not in STATUS_EVENT:
        raise InvalidInput(f"journal: {status!r} is not a sealed run status")
    event = STATUS_EVENT[status]
    transition(state, event)  # raises when the row cannot take evidence now
    return event


def seal_overdue(ended_at: float, now: float, grace_s: float) -> bool:
    """True once the host had `grace_s` after Slurm's end to seal, and did not."""
    return now - ended_at >= grace_s


def lost(unknown_since: float | None, now: float, lost_after_s: float) -> bool:
    """True when no answer has listed the job for `lost_after_s`: treat it as ended (and
    wait for the seal), since squeue forgets ended jobs and accounting may be off."""
    return unknown_since is not None and now - unknown_since >= lost_after_s


EXCLUDE_POLICIES = ("never", "node-fail", "always")


def retry_exclude(excluded: Sequence[str], node: str | None, ended: JobState, *,
                  policy: str = "node-fail", max_excluded: int = 8) -> tuple[str, ...]:
    """The --exclude of the retry of an interrupted attempt. Pure.

    `node-fail` (default): avoid the node Slurm lost; `always`: avoid the node of any
    interrupted attempt; `never`: keep the list. Bounded, so a flaky night cannot exclude
    a whole partition (the oldest exclusions are dropped first)."""
    if policy not in EXCLUDE_POLICIES:
        raise InvalidInput(f"exclude policy must be one of {EXCLUDE_POLICIES}: {policy!r}")
    out = list(dict.fromkeys(excluded))
    add = node is not None and (policy == "always"
                                or (policy == "node-fail" and ended == JobState.NODE_FAIL))
    if add and node not in out:
        out.append(node)
    return tuple(out[-max_excluded:]) if max_excluded > 0 else ()


@dataclass(frozen=True)
class Step:
    """One thing a restarted controller does for a row: adopt a job, resubmit, wait, ask
    for evidence (`unsure`), or cancel duplicate jobs (`cancel`: their ids)."""

    kind: str
    row: Remote
    job_id: str | None = None
    cancel: tuple[str, ...] = ()


def resume_steps(rows: Sequence[Remote], found: Mapping[str, Sequence[Job]], *, now: float,
                 history_complete: bool, settle_s: float = 5.0,
                 min_job_age_s: float = 300.0) -> list[Step]:
    """What a controller restarted after `kill -9` does with its remote rows. Pure.

    `found`: the jobs carrying each token (query.by_name), from squeue plus sacct or
    jobcomp. `history_complete`: accounting or jobcomp covers jobs that left squeue.

    A `submitting` row's job is adopted when its token is found (the oldest job; any other
    live job with the token is cancelled, so a night never runs a slot twice). When none is
    found: wait while sbatch might still be landing (`settle_s`); resubmit when an ended
    job would still show (squeue keeps ended jobs `min_job_age_s`, or history is
    complete); otherwise `unsure`: the job may have run and left every answer, so the
    caller looks for its sealed evidence before anything is submitted again.
    A row that already has a job id gets `cancel` steps for other live jobs with its token.
    """
    steps = []
    for row in rows:
        jobs = list(found.get(row.token, ())) if row.token else []
        if row.state == "submitting":
            steps.append(_resume_submitting(row, jobs, now, history_complete, settle_s,
                                            min_job_age_s))
        elif row.state in _LIVE and row.job_id is not None:
            extra = tuple(j.job_id for j in jobs
                          if j.job_id != row.job_id and j.state not in ENDED)
            if extra:
                steps.append(Step("cancel", row, row.job_id, extra))
    return steps


def _resume_submitting(row: Remote, jobs: list[Job], now: float, history_complete: bool,
                       settle_s: float, min_job_age_s: float) -> Step:
    if jobs:
        keep = jobs[0]  # query.by_name sorts oldest first
        extra = tuple(j.job_id for j in jobs[1:] if j.state not in ENDED)
        return Step("adopt", row, keep.job_id, extra)
    age = now - row.since
    if age < settle_s:
        return Step("wait", row)
    if history_complete or age < min_job_age_s:
        return Step("resubmit", row)
    return Step("unsure", row)


def to_submit(pending: int, planned: int, *, window: int, stopping: bool) -> int:
    """How many planned rows to submit now. Pure.

    Only `window` jobs wait in Slurm's queue at once, so `--until` or a stop-on-refusal
    has only a few pending jobs to cancel, and a new campaign file's rows are not queued
    hours ahead. Nothing is submitted once the night is stopping."""
    if stopping or window < 1:
        return 0
    return max(0, min(planned, window - max(0, pending)))


def to_cancel_on_stop(rows: Sequence[Remote]) -> list[Remote]:
    """Rows whose job to scancel when the night stops: only pending ones (`submitted`).
    A running job is left to finish and seal; its evidence is what the night reports."""
    return [r for r in rows if r.state == "submitted" and r.job_id is not None]


def next_poll_s(previous_s: float, *, changed: bool, failures: int, base_s: float = 2.0,
                ceiling_s: float = 60.0, factor: float = 1.5) -> float:
    """Seconds to the next batched status query. Pure.

    Back to `base_s` as soon as something changed (a job started or ended); slower by
    `factor` each quiet cycle, up to `ceiling_s`; after failed queries, doubling from the
    base per consecutive failure (a controller under load is not hammered)."""
    if failures > 0:
        return min(ceiling_s, base_s * 2.0 ** min(failures, 30))
    if changed:
        return base_s
    return min(ceiling_s, max(base_s, previous_s * factor))


def query_gave_up(failures: int, limit: int = 5) -> bool:
    """True after `limit` consecutive failed queries: an environment fault, not a state."""
    return failures >= limit

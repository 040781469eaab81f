"""When a campaign stops, and when an interrupted control is tried again. Pure.

Every command that walks a plan (`run`, `night`, a future Slurm executor) asks these
functions after each control, so the campaign's `stop_policy` means one thing everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.errors import InvalidInput

STOP_POLICIES = ("continue", "stop-on-refusal", "stop-on-failure")
STATUSES = ("accepted", "refused", "failed", "timed-out", "interrupted")
ENVIRONMENT = 3  # the exit code of an environment fault: no engine, lock timeout, ...

# Why a campaign stopped after a control; None means go on with the next one.
INTERRUPTED = "interrupted"
ENVIRONMENT_STOP = "environment"
STOP_POLICY = "stop-policy"


def stop_reason(policy: str, status: str, exit_code: int, stop_requested: bool, *,
                remote: bool = False) -> str | None:
    """Why the campaign stops after a control that ended with `status`/`exit_code`, or None.

    A signal (the run was interrupted, or a stop was asked while it sealed) stops every
    campaign; so does an environment fault (exit 3), since the next control would meet
    the same host. Then the campaign's own policy: `stop-on-refusal` stops on anything but
    accepted, `stop-on-failure` on failed or timed out, `continue` never.
    `remote`: the control ran elsewhere (a Slurm job); its interruption (scancel, a lost
    node) stopped that host's run, not this walk, so the policy and retry rule decide."""
    if policy not in STOP_POLICIES:
        raise InvalidInput(f"unknown stop policy {policy!r} (one of {', '.join(STOP_POLICIES)})")
    if (status == "interrupted" and not remote) or stop_requested:
        return INTERRUPTED
    if exit_code == ENVIRONMENT:
        return ENVIRONMENT_STOP
    if policy == "stop-on-refusal" and status != "accepted":
        return STOP_POLICY
    if policy == "stop-on-failure" and status in ("failed", "timed-out"):
        return STOP_POLICY
    return None


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


def retry_allowed(policy: RetryPolicy, state: str, attempt: int) -> bool:
    """Whether a slot whose newest attempt (number `attempt`) ended in `state` is tried again.

    Only an interruption is retried (the host, not the control, stopped it); a refused,
    failed or timed-out control would only repeat its verdict."""
    return state == "interrupted" and attempt < policy.max_attempts

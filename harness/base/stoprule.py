"""Whether a run's status stops a walk of the plan under a stop policy. Pure.

One rule for both sides of a Slurm night: the controller asks it after every outcome
(`driver.policy.stop_reason`), and a host asks it of the run before in its job before it
launches the next (`measure.slurm.claim`), so the two never disagree on where a night stops."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

from harness.base.errors import ENVIRONMENT, InvalidInput
from harness.base.states import TERMINAL, Status

StopPolicy = Literal["continue", "stop-on-refusal", "stop-on-failure"]
STOP_POLICIES: tuple[str, ...] = get_args(StopPolicy)
_FAILURES = frozenset(TERMINAL - {Status.ACCEPTED, Status.REFUSED})  # failed, timed out


class Stop(StrEnum):
    """Why a run's status stops the walk."""

    ENVIRONMENT = "environment"  # a host fault: the next control would meet the same host
    POLICY = "stop-policy"


def environment_stops(exit_code: int) -> bool:
    """An environment fault stops every walk: the next control would meet the same host."""
    return exit_code == ENVIRONMENT


def stops(policy: str, status: Status, exit_code: int) -> Stop | None:
    """Why a run that ended with `status` and `exit_code` stops the walk, or None to go on:
    an environment fault under every policy, then the policy. An unknown policy is
    InvalidInput whatever the run did, so a typo never reads as `continue`."""
    if policy not in STOP_POLICIES:
        raise InvalidInput(f"unknown stop policy {policy!r} (one of {', '.join(STOP_POLICIES)})")
    if environment_stops(exit_code):
        return Stop.ENVIRONMENT
    if policy == "stop-on-refusal" and status != Status.ACCEPTED:
        return Stop.POLICY
    if policy == "stop-on-failure" and status in _FAILURES:
        return Stop.POLICY
    return None

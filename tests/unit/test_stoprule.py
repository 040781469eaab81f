"""The one stop rule a Slurm night's controller and its hosts both ask: every policy x
status x exit code, and the policies named once."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from harness.base.errors import InvalidInput
from harness.base.states import Status
from harness.base.stoprule import STOP_POLICIES, Stop, stops
from harness.config.schema import Campaign
from harness.driver import policy

STOPPED_BY = {  # policy -> the statuses after which it stops the walk by itself
    "continue": set(),
    "stop-on-refusal": set(Status) - {Status.ACCEPTED},
    "stop-on-failure": {Status.FAILED, Status.TIMED_OUT},  # an interruption may be retried
}


@pytest.mark.parametrize(("name", "status", "code"),
                         list(itertools.product(STOP_POLICIES, Status, (0, 1, 2, 3))))
def test_every_policy_status_and_exit_code(name: str, status: Status, code: int) -> None:
    got = stops(name, status, code)
    if code == 3:  # an environment fault: the next control would meet the same host
        assert got is Stop.ENVIRONMENT
    elif status in STOPPED_BY[name]:
        assert got is Stop.POLICY
    else:
        assert got is None


@pytest.mark.parametrize("code", [0, 3])
def test_an_unknown_policy_is_refused_whatever_the_run_did(code: int) -> None:
    with pytest.raises(InvalidInput, match="unknown stop policy"):
        stops("stop-on-everything", Status.ACCEPTED, code)


def test_the_policies_and_the_reasons_are_named_once() -> None:
    assert get_args(Campaign.model_fields["stop_policy"].annotation) == STOP_POLICIES
    assert policy.Why.ENVIRONMENT == Stop.ENVIRONMENT and policy.Why.STOP_POLICY == Stop.POLICY

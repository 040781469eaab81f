"""The journal's pure rules: every (state, event) pair, resume decisions and next actions."""

from __future__ import annotations

import itertools

import pytest

from harness.base.states import TERMINAL, State
from harness.driver.night.rules import next_step
from harness.driver.policy import RetryPolicy
from harness.measure.nightfolder.rows import Row
from harness.measure.nightfolder.transitions import (
    EVENTS,
    IllegalTransition,
    Step,
    outcome_event,
    resume_steps,
    transition,
)

STATES = tuple(State)

EXPECTED = {
    ("planned", "start"): "running",
    ("planned", "defer"): "deferred",
    ("planned", "refuse"): "refused",
    ("planned", "fail"): "failed",
    ("running", "accept"): "accepted",
    ("running", "time-out"): "timed-out",
    ("running", "refuse"): "refused",
    ("running", "fail"): "failed",
    ("running", "interrupt"): "interrupted",
    ("running", "slurm-job"): "running",  # records the Slurm job; the row stays running
    ("running", "withdraw"): "planned",  # its job was cancelled while pending: not run
    ("deferred", "requeue"): "planned",
    ("planned", "leave"): "planned",  # the walk ended before it ran: why, in its reason
}


@pytest.mark.parametrize(("state", "event"), list(itertools.product(STATES, EVENTS)))
def test_every_state_event_pair(state: str, event: str) -> None:
    if (state, event) in EXPECTED:
        assert transition(state, event) == EXPECTED[(state, event)]
    else:
        with pytest.raises(IllegalTransition):
            transition(state, event)


def test_terminal_states_accept_no_event() -> None:
    for state in TERMINAL | {"interrupted"}:
        for event in EVENTS:
            with pytest.raises(IllegalTransition):
                transition(state, event)


def test_unknown_state_or_event_is_illegal() -> None:
    with pytest.raises(IllegalTransition):
        transition("planned", "explode")
    with pytest.raises(IllegalTransition):
        transition("zombie", "start")


def row(i: int, state: str, *, plan: int | None = None, attempt: int = 1) -> Row:
    return Row(
        id=i, plan_index=i if plan is None else plan, control=f"c{i}", repeat_index=0,
        attempt=attempt, state=state, run_id=None, run_dir=None, reason=None, rerun_of=None,
        origin="plan", link_reason=None, updated="2026-11-30T00:00:00Z",
    )


ONE = RetryPolicy(max_attempts=1)
TWO = RetryPolicy(max_attempts=2)


def test_launch_first_planned_in_plan_order() -> None:
    rows = [row(3, "planned"), row(1, "accepted"), row(2, "planned")]
    assert next_step(rows, ONE) == Step("launch", rows[2])


def test_done_when_nothing_is_planned() -> None:
    rows = [row(1, "accepted"), row(2, "refused"), row(3, "failed"), row(4, "deferred"),
            row(5, "timed-out")]
    assert next_step(rows, TWO) == Step("done")


def test_finished_rows_never_run_again_even_with_retries() -> None:
    for state in TERMINAL:
        assert next_step([row(1, state)], RetryPolicy(max_attempts=9)).kind == "done"


def test_running_row_at_resume_is_interrupted_first() -> None:
    rows = [row(1, "planned"), row(2, "running")]
    assert next_step(rows, ONE) == Step("interrupt", rows[1])
    assert resume_steps(rows) == [Step("interrupt", rows[1])]


def test_interrupted_retried_only_within_policy() -> None:
    interrupted = row(1, "interrupted")
    assert next_step([interrupted], ONE).kind == "done"
    assert next_step([interrupted], TWO) == Step("retry", interrupted)
    second = row(2, "interrupted", plan=1, attempt=2)
    assert next_step([interrupted, second], TWO).kind == "done"


def test_newest_attempt_decides_the_slot() -> None:
    old = row(1, "interrupted", plan=0)
    new = row(2, "planned", plan=0, attempt=2)
    assert next_step([old, new], TWO) == Step("launch", new)
    accepted = row(3, "accepted", plan=0, attempt=2)
    assert next_step([old, accepted], RetryPolicy(5)).kind == "done"


def test_retry_comes_before_later_launches() -> None:
    rows = [row(1, "interrupted", plan=0), row(2, "planned", plan=1)]
    assert next_step(rows, TWO).kind == "retry"


def test_resume_requeues_deferred_and_ignores_finished() -> None:
    rows = [row(1, "deferred"), row(2, "accepted"), row(3, "interrupted")]
    assert resume_steps(rows) == [Step("requeue", rows[0])]


def test_policy_rejects_zero_attempts() -> None:
    with pytest.raises(Exception, match="max_attempts"):
        RetryPolicy(max_attempts=0)


@pytest.mark.parametrize(("status", "text", "recorded"), [
    ("accepted", "ignored", ("accept", None)),
    ("refused", "POST-GATE: differs", ("refuse", "POST-GATE: differs")),
    ("failed", "RUN-EXIT: 7", ("fail", "RUN-EXIT: 7")),
    ("timed-out", "RUN-TIMEOUT: 1m", ("time-out", "RUN-TIMEOUT: 1m")),  # no status prefix
    ("interrupted", "", ("interrupt", "interrupted")),  # no reasons: the status says why
    ("exploded", "x", ("fail", "exploded: x")),  # a status the journal does not know
])
def test_a_runs_status_is_recorded_in_its_own_word(status, text, recorded) -> None:
    assert outcome_event(status, text) == recorded
    event, _ = recorded
    assert transition("running", event) == (status if status in STATES else "failed")

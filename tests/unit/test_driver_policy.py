"""The campaign driver without Docker: the stop policy for every policy x status, the retry
rule, and `run_one`/`drive` recording each launch before it happens and each outcome after,
with an in-memory executor (a window of one, as on one host)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from harness.base.errors import EnvironmentFault, InvalidInput
from harness.base.reason import Reason
from harness.base.slots import Slot, slots_of
from harness.base.states import STATUSES, Status
from harness.base.stoprule import STOP_POLICIES, environment_stops
from harness.driver.drive import crashed, drive, run_one
from harness.driver.plan import LaunchRequest, Outcome, PlanSource
from harness.driver.policy import (
    RetryPolicy,
    StoppedAfter,
    Why,
    not_executed,
    retry_allowed,
    stop_reason,
    why_not_executed,
)

# status -> (exit code `harness.judge.verdict.exit_code` gives it, stops under each policy)
CODES = {"accepted": 0, "refused": 1, "failed": 1, "timed-out": 1, "interrupted": 1}
STOPS = {  # policy -> the statuses after which it stops the campaign (by itself)
    "continue": set(),
    "stop-on-refusal": {"refused", "failed", "timed-out"},
    "stop-on-failure": {"failed", "timed-out"},
}


def ended(status: str, code: int | None = None, stop_requested: bool = False, *,
          remote: bool = False) -> Outcome:
    return Outcome(Path("/runs/x"), Status(status), CODES[status] if code is None else code,
                   stop_requested=stop_requested, remote=remote)


@pytest.mark.parametrize(("policy", "status"), list(itertools.product(STOP_POLICIES, STATUSES)))
def test_every_policy_and_status(policy: str, status: str) -> None:
    why = stop_reason(policy, ended(status))
    if status == "interrupted":
        assert why == "interrupted"  # a signal stops every campaign
    elif status in STOPS[policy]:
        assert why == "stop-policy"
    else:
        assert why is None


def test_a_remote_interruption_is_the_policys_to_judge() -> None:
    """A Slurm job cancelled or lost stopped that host's run, not the walk: `continue`
    goes on (and the retry rule may try it again), stop-on-refusal still stops."""
    assert stop_reason("continue", ended("interrupted", remote=True)) is None
    assert stop_reason("stop-on-failure", ended("interrupted", remote=True)) is None
    assert stop_reason("stop-on-refusal", ended("interrupted", remote=True)) == "stop-policy"
    assert stop_reason("continue", ended("interrupted", None, True, remote=True)) == (
        "interrupted")
    assert stop_reason("continue", ended("accepted", remote=True)) is None


@pytest.mark.parametrize(("policy", "status"), list(itertools.product(STOP_POLICIES, STATUSES)))
def test_a_stop_asked_while_sealing_stops_every_policy(policy: str, status: str) -> None:
    assert stop_reason(policy, ended(status, stop_requested=True)) == "interrupted"


@pytest.mark.parametrize(("policy", "status"),
                         list(itertools.product(STOP_POLICIES, ("refused", "failed"))))
def test_an_environment_fault_stops_every_policy(policy: str, status: str) -> None:
    # exit 3: lock timeout, no engine, missing image; the next control would meet the same
    assert stop_reason(policy, ended(status, 3)) == "environment"
    assert environment_stops(3) and not environment_stops(1) and not environment_stops(2)


def test_an_unknown_policy_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="stop policy"):
        stop_reason("stop-on-tuesdays", ended("accepted"))


@pytest.mark.parametrize(("max_attempts", "state", "attempt", "allowed"), [
    (1, "interrupted", 1, False),  # no retries: an interruption is final
    (2, "interrupted", 1, True),
    (2, "interrupted", 2, False),
    (3, "interrupted", 2, True),
    *[(9, s, 1, False) for s in ("accepted", "refused", "failed", "timed-out", "planned",
                                 "running", "deferred")],
])
def test_retry_only_an_interruption_within_the_policy(max_attempts, state, attempt, allowed):
    assert retry_allowed(RetryPolicy(max_attempts), state, attempt) is allowed


def test_retry_policy_from_the_campaign_counts_extra_attempts() -> None:
    assert RetryPolicy.extra(0) == RetryPolicy(1) and RetryPolicy.extra(2).max_attempts == 3
    with pytest.raises(InvalidInput):
        RetryPolicy(0)


class Log:
    """A recorder and an executor in memory, writing one shared log of what happened."""

    def __init__(self, statuses: list[str], raises: Exception | None = None) -> None:
        self.statuses = iter(statuses)
        self.raises = raises
        self.log: list[tuple] = []

    def started(self, request: LaunchRequest) -> None:
        self.log.append(("started", request.control))

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None:
        self.log.append(("finished", request.control, outcome.status,
                         "; ".join(r.text() for r in outcome.reasons)))

    def launch(self, request: LaunchRequest) -> Outcome:
        self.log.append(("launch", request.control))
        if self.raises is not None:
            raise self.raises
        status = next(self.statuses)
        return Outcome(request.run_dir, Status(status), CODES[status],
                       (Reason("X-WHY", status),))


class Source(Log, PlanSource):
    """The plan of `harness run` and a window-of-one executor, logging both sides."""

    window, together, per_job = 1, False, 1

    def __init__(self, plan: list[str], statuses: list[str], **kw) -> None:
        Log.__init__(self, statuses, **kw)
        PlanSource.__init__(self, [(c, 0) for c in plan], Path("/runs"))

    def start(self, requests: tuple[LaunchRequest, ...]) -> Outcome:
        [request] = requests
        return self.launch(request)


def test_run_one_records_the_launch_before_it_and_the_outcome_after(tmp_path: Path) -> None:
    log = Log(["refused"])
    request = LaunchRequest("kv", tmp_path / "kv-1")
    outcome = run_one(request, log, log)
    assert outcome.status == "refused" and outcome.run_dir == tmp_path / "kv-1"
    assert log.log == [("started", "kv"), ("launch", "kv"),
                       ("finished", "kv", "refused", "X-WHY: refused")]


def test_run_one_records_a_launch_that_raised_as_failed_then_raises(tmp_path: Path) -> None:
    log = Log([], raises=RuntimeError("bug"))
    with pytest.raises(RuntimeError, match="bug"):
        run_one(LaunchRequest("kv", tmp_path / "kv-1"), log, log)
    assert log.log[-1] == ("finished", "kv", "failed", "HARNESS-ERROR: RuntimeError: bug")


def test_an_error_the_harness_could_not_seal_past_is_a_failed_outcome(tmp_path: Path) -> None:
    e = EnvironmentFault("could not seal", rule="ENV-SEAL")
    out = crashed(LaunchRequest("kv", tmp_path / "kv-1"), e)
    assert (out.status, out.exit_code, out.reasons, out.stop_requested, out.error) == (
        "failed", 3, (Reason("ENV-SEAL", "could not seal"),), True, e)
    assert out.reasons[0].environment  # the catalogue says so, not the text


class Events:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def event(self, kind: str, **fields: object) -> None:
        self.events.append((kind, fields))


@pytest.mark.parametrize(("policy", "statuses", "why", "launched"), [
    ("continue", ["refused", "failed", "accepted"], "done", 3),
    ("stop-on-refusal", ["accepted", "refused", "accepted"], "stop-policy", 2),
    ("stop-on-failure", ["refused", "timed-out", "accepted"], "stop-policy", 2),
    ("continue", ["accepted", "interrupted", "accepted"], "interrupted", 2),
])
def test_drive_walks_the_plan_until_the_policy_stops_it(policy, statuses, why, launched):
    source, ui, seen = Source(["a", "b", "c"], statuses), Events(), []
    driven = drive(source, source, stop_policy=policy, ui=ui, raise_errors=False,
                   on_outcome=seen.append)
    assert driven.why == why
    assert [o.status for o in driven.outcomes] == statuses[:launched] == [o.status for o in seen]
    assert [e for e in source.log if e[0] == "launch"] == [("launch", c) for c in "abc"[:launched]]
    assert driven.worst == max(CODES[s] for s in statuses[:launched])
    stop_events = [f for kind, f in ui.events if kind == "stop-policy"]
    assert stop_events == ([{"policy": policy, "status": statuses[launched - 1]}]
                           if why == "stop-policy" else [])


class Crashing(Source):
    def launch(self, request: LaunchRequest) -> Outcome:
        self.log.append(("launch", request.control))
        return crashed(request, EnvironmentFault("disk full", rule="ENV-DISK-FULL"))


def test_drive_raises_a_harness_error_or_stops_on_it_as_asked() -> None:
    source = Crashing(["a", "b"], [])
    with pytest.raises(EnvironmentFault, match="disk full"):
        drive(source, source, stop_policy="continue", ui=Events(), raise_errors=True)
    assert [e for e in source.log if e[0] == "launch"] == [("launch", "a")]
    assert source.log[-1] == ("finished", "a", "failed", "ENV-DISK-FULL: disk full")

    source = Crashing(["a", "b"], [])  # the night: recorded, and the walk stops
    driven = drive(source, source, stop_policy="continue", ui=Events(), raise_errors=False)
    assert driven.why == "interrupted" and [o.exit_code for o in driven.outcomes] == [3]


def test_plan_source_gives_each_slot_once_with_a_fresh_folder() -> None:
    source = PlanSource([("a", 0), ("a", 1), ("b", 0)], Path("runs"))
    requests = [r for _ in range(3) for r in source.next_launches()]
    assert source.next_launches() == "done"
    assert [(r.control, r.plan_index, r.attempt) for r in requests] == [
        ("a", 0, 1), ("a", 1, 1), ("b", 2, 1)]
    assert all(r.run_dir.is_absolute() and r.run_dir.name.startswith(f"{r.control}-")
               for r in requests)
    assert len({r.run_id for r in requests}) == 3


REFUSAL = StoppedAfter("a", Status.REFUSED, ("GATE0-FIELD-DIFFERS",))


@pytest.mark.parametrize(("why", "after", "deadline", "text"), [
    (Why.STOP_POLICY, REFUSAL, None,
     "stop_policy stop-on-refusal after a was refused (GATE0-FIELD-DIFFERS)"),
    (Why.STOP_POLICY, StoppedAfter("a", Status.FAILED), None,
     "stop_policy stop-on-refusal after a was failed"),
    (Why.DEADLINE, None, "--until 06:30", "deadline --until 06:30 reached"),
    (Why.DEADLINE, None, "--max-hours 2", "deadline --max-hours 2 reached"),
    (Why.DEADLINE, None, "window 22:00-06:30", "window 22:00-06:30 closed"),
    (Why.DEADLINE, None, None, "deadline reached"),
    (Why.INTERRUPTED, REFUSAL, None, "interrupted"),
    (Why.ENVIRONMENT, StoppedAfter("a", Status.FAILED, ("ENV-DISK-FULL",)), None,
     "environment fault after a was failed (ENV-DISK-FULL)"),
])
def test_why_a_slot_was_not_executed_names_the_stop(why, after, deadline, text) -> None:
    assert why_not_executed(why, "stop-on-refusal", after, deadline) == text


def test_not_executed_names_each_slot_left_with_its_repeat_where_the_control_repeats() -> None:
    plan = [("a", 0), ("b", 0), ("b", 1), ("c", 0)]
    left = slots_of(plan, [3, 1, 2])
    assert [s.label for s in left] == ["b (repeat 1)", "b (repeat 2)", "c"]
    found = not_executed(reversed(left), Why.STOP_POLICY, "stop-on-refusal", REFUSAL)
    assert [n.line() for n in found] == [
        f"{label}: stop_policy stop-on-refusal after a was refused (GATE0-FIELD-DIFFERS)"
        for label in ("b (repeat 1)", "b (repeat 2)", "c")]
    assert found[0].as_dict() == {
        "control": "b", "plan_index": 1, "repeat_index": 0, "label": "b (repeat 1)",
        "why": "stop_policy stop-on-refusal after a was refused (GATE0-FIELD-DIFFERS)"}
    assert not_executed(left, Why.DONE, "continue") == ()  # a done walk left nothing by a stop
    assert slots_of(plan, [7, -1]) == ()
    assert Slot(0, "a").label == "a"


@pytest.mark.parametrize(("statuses", "left"), [
    (["refused", "accepted", "accepted"], ["b", "c"]),
    (["accepted", "refused", "accepted"], ["c"]),
    (["accepted", "accepted", "refused"], []),
])
def test_drive_carries_the_slots_a_stop_left_unrun(statuses, left) -> None:
    source = Source(["a", "b", "c"], statuses)
    driven = drive(source, source, stop_policy="stop-on-refusal", ui=Events())
    assert [n.slot.control for n in driven.not_executed] == left
    stopped = "abc"[statuses.index("refused")]
    assert {n.why for n in driven.not_executed} <= {
        f"stop_policy stop-on-refusal after {stopped} was refused (X-WHY)"}
    assert driven.after == StoppedAfter(stopped, Status.REFUSED, ("X-WHY",))

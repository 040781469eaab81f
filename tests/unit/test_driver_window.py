"""The one campaign loop with several launches in flight, without Slurm: how many fly at
once, the order outcomes are recorded in, and what a stop cancels; and that a window of
one and a window of three stop on the same policy decisions. The executor here is a plain
script of which job ends after how many polls (the real one is tested on a cluster in
tests/slurm).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.base.reason import Reason
from harness.base.slots import Slot
from harness.base.states import Status
from harness.driver.drive import drive
from harness.driver.plan import LaunchRequest, Outcome
from harness.measure.ui import Reporter


@dataclass
class Job:
    requests: tuple[LaunchRequest, ...]
    polls_left: int
    status: str
    started: bool = False
    cancelled: bool = False
    failures: int = 0


class Script:
    """Control name -> (polls until it ends, status, polls until Slurm starts it)."""

    together = True  # a group is one job
    per_job = 1

    def __init__(self, plan: dict[str, tuple[int, str, int]], *, gpus: int = 99,
                 window: int = 4) -> None:
        self.plan, self.gpus, self.window = plan, gpus, window
        self.flying: list[Job] = []
        self.most = 0
        self.cancelled: list[str] = []

    def start(self, requests: tuple[LaunchRequest, ...]) -> Job | Outcome:
        """One job for the launch: a group's polls are its first member's."""
        polls, status, _ = self.plan[requests[0].control]
        if status == "submit-refused":
            return Outcome.of(requests[0].run_dir, Status.FAILED,
                              [Reason("ENV-SLURM-SUBMIT", "no")], remote=True)
        job = Job(requests, polls, status)
        self.flying.append(job)
        self.most = max(self.most, len(self.flying))
        return job

    def poll(self, flying: list[Job]):
        done: list[tuple[Job, LaunchRequest, Outcome | None]] = []
        running = sum(j.started for j in flying)
        for job in flying:
            if not job.started and not job.cancelled and running < self.gpus:
                job.started, running = True, running + 1
            if job.cancelled and not job.started:
                done += [(job, r, None) for r in job.requests]
            elif job.started:
                job.polls_left -= 1
                if job.polls_left <= 0:  # every member ends with the job, in order
                    for r in job.requests:
                        status = self.plan[r.control][1]
                        done.append((job, r, Outcome.of(r.run_dir, status, remote=True)))
        for job in {id(j): j for j, _, _ in done}.values():
            self.flying.remove(job)
        return done, bool(done)

    def pause(self, changed: bool, failures: int) -> None:
        """No clock here."""

    def cancel_pending(self, flying: list[Job]) -> list[Job]:
        out = [j for j in flying if not j.started and not j.cancelled]
        for j in out:
            j.cancelled = True
            self.cancelled += [r.control for r in j.requests]
        return out


class Plan:
    """A source over a list of controls ("a+b": a same_host group, one launch), recording
    as a journal would."""

    def __init__(self, controls: list[str], deadline_after: int | None = None) -> None:
        names = [c for launch in controls for c in launch.split("+")]
        self.todo = [tuple((names.index(c), c) for c in launch.split("+"))
                     for launch in controls]
        self.log: list[tuple[str, str]] = []
        self.deadline_after = deadline_after  # cycles until the deadline passes
        self.withdrawn_slots: list[Slot] = []

    def next_launches(self, busy: frozenset[int] = frozenset(), *, together: bool = True,
                      ) -> tuple[LaunchRequest, ...] | str:
        if not self.todo:
            return "done"
        launch = self.todo.pop(0)
        assert not busy & {index for index, _ in launch}
        return tuple(LaunchRequest(control, Path("/runs") / control, plan_index=index)
                     for index, control in launch)

    def started(self, request: LaunchRequest) -> None:
        self.log.append(("started", request.control))

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None:
        self.log.append((outcome.status, request.control))

    def withdrawn(self, request: LaunchRequest, reason: str) -> None:
        self.log.append(("not-run", request.control))
        self.withdrawn_slots.append(Slot(request.plan_index or 0, request.control))

    def left(self) -> tuple[Slot, ...]:
        return (*self.withdrawn_slots,
                *(Slot(index, control) for launch in self.todo for index, control in launch))

    def past_deadline(self) -> bool:
        if self.deadline_after is None:
            return False
        self.deadline_after -= 1
        return self.deadline_after < 0


def walk(plan: Plan, script: Script, window: int, policy: str = "continue",
         ui: Reporter | None = None):
    script.window = window
    return drive(plan, script, stop_policy=policy, ui=ui or Reporter(io.StringIO()))


@pytest.mark.parametrize("window", [1, 2, 4])
def test_never_more_than_window_in_flight_and_outcomes_as_they_end(window: int) -> None:
    controls = {"a": (3, "accepted", 0), "b": (1, "accepted", 0), "c": (2, "accepted", 0),
                "d": (1, "accepted", 0)}
    plan, script = Plan(list(controls)), Script(controls)
    driven = walk(plan, script, window)
    assert driven.why == "done" and script.most == min(window, 4)
    assert sorted(c for s, c in plan.log if s == "accepted") == list("abcd")
    if window == 1:  # one at a time: the plan's order, each started after the last ended
        assert plan.log == [(s, c) for c in "abcd" for s in ("started", "accepted")]
    if window == 4:  # all four started first; b and d end before a
        assert [s for s, _ in plan.log[:4]] == ["started"] * 4
        assert [c for s, c in plan.log if s == "accepted"] == ["b", "d", "c", "a"]


def test_a_stop_cancels_the_pending_jobs_and_lets_the_running_ones_finish() -> None:
    controls = {"r": (1, "refused", 0), "long": (4, "accepted", 0),
                "p1": (1, "accepted", 0), "p2": (1, "accepted", 0), "later": (1, "accepted", 0)}
    plan, script = Plan(list(controls)), Script(controls, gpus=2)
    driven = walk(plan, script, 4, "stop-on-refusal")
    assert driven.why == "stop-policy"
    assert script.cancelled == ["p1", "p2"]
    assert ("accepted", "long") in plan.log  # finished and recorded after the stop
    # the cancelled jobs and the rest of the plan are named, with the refusal that stopped it
    assert [n.line() for n in driven.not_executed] == [
        f"{c}: stop_policy stop-on-refusal after r was refused" for c in ("p1", "p2", "later")]
    assert ("not-run", "p1") in plan.log and ("not-run", "p2") in plan.log
    assert not any(c == "later" for _, c in plan.log), "nothing is submitted after a stop"


def test_a_refused_submission_stops_the_walk_before_the_next_is_sent() -> None:
    controls = {"x": (0, "submit-refused", 0), "y": (1, "accepted", 0)}
    plan, script = Plan(list(controls)), Script(controls)
    driven = walk(plan, script, 4)
    assert driven.why == "environment"
    assert plan.log == [("started", "x"), ("failed", "x")]


def test_the_deadline_passing_with_a_full_window_cancels_its_pending_jobs() -> None:
    """No slot frees before the deadline: the walk stops anyway, the pending job is
    cancelled (not run), the running ones finish."""
    controls = {"a": (5, "accepted", 0), "b": (5, "accepted", 0), "c": (1, "accepted", 0),
                "d": (1, "accepted", 0)}
    plan, script = Plan(list(controls), deadline_after=2), Script(controls, gpus=2)
    driven = walk(plan, script, 3)
    assert driven.why == "deadline" and script.cancelled == ["c"]
    assert [c for s, c in plan.log if s == "accepted"] == ["a", "b"]
    assert ("not-run", "c") in plan.log and not any(c == "d" for _, c in plan.log)
    assert [n.line() for n in driven.not_executed] == ["c: deadline reached",
                                                       "d: deadline reached"]


def test_a_group_is_one_job_its_members_started_first_and_recorded_in_order() -> None:
    """A same_host group takes one window slot; every member is journaled `started` before
    its one job is submitted, and each member's outcome is recorded in the group's order."""
    controls = {"x": (1, "accepted", 0), "ctl": (2, "accepted", 0), "ref": (2, "refused", 0),
                "y": (1, "accepted", 0)}
    plan, script = Plan(["x", "ctl+ref", "y"]), Script(controls)
    driven = walk(plan, script, 2)
    assert driven.why == "done" and script.most == 2
    assert plan.log[:3] == [("started", "x"), ("started", "ctl"), ("started", "ref")]
    assert plan.log.index(("accepted", "ctl")) + 1 == plan.log.index(("refused", "ref"))
    assert len(plan.log) == 8


def test_a_stop_withdraws_every_member_of_a_pending_group() -> None:
    controls = {"r": (1, "refused", 0), "ctl": (1, "accepted", 0), "ref": (1, "accepted", 0)}
    plan, script = Plan(["r", "ctl+ref"]), Script(controls, gpus=1)
    driven = walk(plan, script, 2, "stop-on-refusal")
    assert driven.why == "stop-policy" and script.cancelled == ["ctl", "ref"]
    assert ("not-run", "ctl") in plan.log and ("not-run", "ref") in plan.log


def test_a_refused_submission_of_a_group_fails_every_member() -> None:
    controls = {"ctl": (0, "submit-refused", 0), "ref": (1, "accepted", 0)}
    plan, script = Plan(["ctl+ref"]), Script(controls)
    driven = walk(plan, script, 4)
    assert driven.why == "environment"
    assert plan.log == [("started", "ctl"), ("started", "ref"), ("failed", "ctl"),
                        ("failed", "ref")]


@pytest.mark.parametrize(("policy", "statuses", "why", "stopper"), [
    ("stop-on-refusal", ["accepted", "refused", "accepted", "accepted"], "stop-policy", "b"),
    ("stop-on-refusal", ["accepted", "interrupted", "accepted", "accepted"], "stop-policy",
     "b"),  # a Slurm job's interruption is the policy's to judge
    ("stop-on-failure", ["refused", "timed-out", "accepted", "accepted"], "stop-policy", "b"),
    ("continue", ["accepted", "submit-refused", "accepted", "accepted"], "environment", "b"),
    ("continue", ["refused", "failed", "timed-out", "accepted"], "done", None),
])
def test_a_window_of_one_and_of_three_stop_on_the_same_policy_decision(
        policy, statuses, why, stopper) -> None:
    """The one loop asks the one stop policy after each outcome, whatever the window: both
    walks stop for the same reason, on the same outcome, and start nothing after it (a
    window of three only lets what already flies finish)."""
    seen = {}
    for window in (1, 3):
        controls = {c: (1 + (c == "a"), s, 0) for c, s in zip("abcd", statuses, strict=True)}
        out = io.StringIO()
        plan = Plan(list("abcd"))
        driven = walk(plan, Script(controls), window, policy, Reporter(out))
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        seen[window] = (driven.why, [(e["policy"], e["status"]) for e in events
                                     if e.get("event") == "stop-policy"])
        if stopper is None:
            assert [c for s, c in plan.log if s == "started"] == list("abcd")
            continue
        ended = next(i for i, (s, c) in enumerate(plan.log) if c == stopper and s != "started")
        assert not any(s == "started" for s, _ in plan.log[ended:]), plan.log
        assert all(c != "d" for _, c in plan.log)  # never started, whatever the window
    assert seen[1] == seen[3] and seen[1][0] == why
    assert seen[1][1] == ([(policy, statuses[1])] if why == "stop-policy" else [])

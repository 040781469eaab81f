"""The run's stages: one signature, and each names itself in the record when it fails."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

import pytest

from harness.base.errors import EnvironmentFault
from harness.base.reason import Reason
from harness.base.states import exit_code
from harness.judge.verdict import decide
from harness.measure.execute import Interrupted
from harness.pipeline.stage import Stage, error_reason, run_stages


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def event(self, name: str, **fields: object) -> None:
        self.seen.append((name, fields))


@dataclass
class Ctx:  # the fields run_stages reads and writes, nothing else
    ui: Events = field(default_factory=Events)
    outcome: dict | None = None
    preflight: list[Reason] = field(default_factory=list)
    after: list[Reason] = field(default_factory=list)
    stages: list[dict] = field(default_factory=list)


def ok(ctx: Ctx) -> list[Reason]:
    return []


def launch(ctx: Ctx) -> list[Reason]:
    ctx.outcome = {"exit_code": 0}
    return [Reason("MOUNT-SETUID-PLANTED", "x")]


def test_a_refusal_before_launch_stops_and_names_the_stage() -> None:
    ctx = Ctx()
    ran = []

    def refuse(c: Ctx) -> list[Reason]:
        return [Reason("MODEL-MISSING", "no model")]

    def never(c: Ctx) -> list[Reason]:
        ran.append("never")
        return []

    run_stages(ctx, (Stage("preflight", refuse), Stage("launch", never)))
    assert ran == [] and [r.rule for r in ctx.preflight] == ["MODEL-MISSING"]
    assert [(s["name"], s["result"]) for s in ctx.stages] == [("preflight", "refused")]
    assert ctx.stages[0]["rules"] == ["MODEL-MISSING"]
    assert ctx.ui.seen[0][0] == "preflight-refused"


def test_reasons_after_launch_judge_the_run_and_the_next_stage_still_runs() -> None:
    ctx = Ctx()
    run_stages(ctx, (Stage("preflight", ok), Stage("launch", launch), Stage("post", ok)))
    assert [s["result"] for s in ctx.stages] == ["ok", "refused", "ok"]
    assert ctx.preflight == [] and [r.rule for r in ctx.after] == ["MOUNT-SETUID-PLANTED"]
    status, _ = decide(preflight=ctx.preflight, outcome=ctx.outcome, post=[], after=ctx.after)
    assert status == "refused"


def test_an_exception_is_recorded_under_the_stage_that_raised() -> None:
    ctx = Ctx()

    def broken(c: Ctx) -> list[Reason]:
        raise OSError(errno.EACCES, "Permission denied")

    run_stages(ctx, (Stage("preflight", ok), Stage("launch", broken), Stage("post", ok)))
    assert [(s["name"], s["result"]) for s in ctx.stages] == [
        ("preflight", "ok"), ("launch", "error")]
    (reason,) = ctx.preflight
    assert reason.rule == "ENV-IO" and reason.detail.startswith("stage launch: ")
    assert ctx.stages[1]["rule"] == "ENV-IO"
    status, reasons = decide(preflight=ctx.preflight, outcome=None, post=[], after=[])
    assert (status, exit_code(status, reasons)) == ("refused", 3)


def test_an_exception_after_launch_is_judged_with_the_outcome() -> None:
    ctx = Ctx()

    def post_crash(c: Ctx) -> list[Reason]:
        raise RuntimeError("bug")

    run_stages(ctx, (Stage("launch", lambda c: (setattr(c, "outcome", {"exit_code": 0}),
                                                [])[1]), Stage("post", post_crash)))
    assert [r.rule for r in ctx.after] == ["HARNESS-ERROR"]
    assert ctx.after[0].detail == "stage post: RuntimeError: bug"


def test_a_signal_is_recorded_against_the_stage_it_cut_and_passes_through() -> None:
    ctx = Ctx()

    def cut(c: Ctx) -> list[Reason]:
        raise Interrupted("SIGTERM")

    with pytest.raises(Interrupted):
        run_stages(ctx, (Stage("launch", cut),))
    assert ctx.stages[0]["result"] == "interrupted"


@pytest.mark.parametrize(("error", "rule"), [
    (EnvironmentFault("no engine", rule="ENV-NO-ENGINE"), "ENV-NO-ENGINE"),
    (EnvironmentFault("odd"), "ENV-ERROR"),
    (OSError(errno.ENOSPC, "No space left on device"), "ENV-DISK-FULL"),
    (ValueError("bug"), "HARNESS-ERROR"),
])
def test_error_reason_names_a_catalogued_rule(error: BaseException, rule: str) -> None:
    assert error_reason(error).rule == rule


def test_a_stage_judged_elsewhere_is_recorded_but_not_filed_twice() -> None:
    ctx = Ctx(outcome={"exit_code": 0})

    def post(c: Ctx) -> list[Reason]:
        return [Reason("GATE0-FIELD-DIFFERS", "x differs", by="gate0")]

    run_stages(ctx, (Stage("post", post, files=False), Stage("after", ok)))
    assert ctx.after == [] and ctx.preflight == []
    assert ctx.stages[0] == {"name": "post", "result": "refused",
                             "seconds": ctx.stages[0]["seconds"],
                             "rules": ["GATE0-FIELD-DIFFERS"]}
    assert [s["name"] for s in ctx.stages] == ["post", "after"]

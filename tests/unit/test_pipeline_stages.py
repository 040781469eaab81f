"""The run's stages: one signature, each returns a frozen result the runner alone stores,
and each names itself in the record when it fails."""

from __future__ import annotations

import ast
import dataclasses
import errno
from pathlib import Path

import pytest

from harness.base.catalogue import RUN_INTERRUPTED
from harness.base.errors import EnvironmentFault
from harness.base.reason import Reason
from harness.base.signals import Interrupted
from harness.base.states import StageResult, Status, Verdict, exit_code
from harness.judge.verdict import decide
from harness.judge.verdictfile import PostResult
from harness.measure.lock import Held
from harness.pipeline.context import RunContext
from harness.pipeline.results import Launch, Post, Preflight
from harness.pipeline.stage import Stage, error_reason, run_stages

HARNESS = Path(__file__).resolve().parents[2] / "harness"


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def event(self, name: str, **fields: object) -> None:
        self.seen.append((name, fields))


def _ctx() -> RunContext:
    """A context with only what the runner reads (no campaign, no folder)."""
    return RunContext(None, None, Path("c.yaml"), "r1", Path("r1"), Events())  # type: ignore[arg-type]


def ok(ctx, keep) -> Preflight:
    return Preflight()


def launched(ctx, keep) -> Launch:
    return Launch(outcome={"exit_code": 0}, reasons=(Reason("MOUNT-SETUID-PLANTED", "x"),))


def test_a_refusal_before_launch_stops_and_names_the_stage() -> None:
    ctx = _ctx()
    ran = []

    def refuse(c, keep) -> Preflight:
        return Preflight(image_id="sha256:x", reasons=(Reason("MODEL-MISSING", "no model"),))

    def never(c, keep) -> Launch:
        ran.append("never")
        return Launch()

    run_stages(ctx, (Stage("preflight", refuse), Stage("launch", never)))
    assert ran == [] and [r.rule for r in ctx.stopped] == ["MODEL-MISSING"]
    assert ctx.preflight.image_id == "sha256:x"  # what it found is kept with the refusal
    assert [(s["name"], s["result"]) for s in ctx.stages] == [("preflight", "refused")]
    assert ctx.stages[0]["rules"] == ["MODEL-MISSING"]
    assert ctx.ui.seen[0][0] == "preflight-refused"


def test_reasons_after_launch_judge_the_run_and_the_next_stage_still_runs() -> None:
    ctx = _ctx()
    run_stages(ctx, (Stage("preflight", ok), Stage("launch", launched),
                     Stage("post", lambda c, keep: Post(), files=False)))
    assert [s["result"] for s in ctx.stages] == ["ok", "refused", "ok"]
    assert ctx.stopped == () and [r.rule for r in ctx.after] == ["MOUNT-SETUID-PLANTED"]
    status, _ = decide(preflight=list(ctx.stopped), outcome=ctx.outcome, post=[],
                       after=list(ctx.after))
    assert status == Status.REFUSED


def test_an_exception_is_recorded_under_the_stage_that_raised() -> None:
    ctx = _ctx()

    def broken(c, keep) -> Launch:
        raise OSError(errno.EACCES, "Permission denied")

    run_stages(ctx, (Stage("preflight", ok), Stage("launch", broken), Stage("post", ok)))
    assert [(s["name"], s["result"]) for s in ctx.stages] == [
        ("preflight", "ok"), ("launch", "error")]
    (reason,) = ctx.stopped
    assert reason.rule == "ENV-IO" and reason.detail.startswith("stage launch: ")
    assert ctx.stages[1]["rule"] == "ENV-IO"
    status, reasons = decide(preflight=list(ctx.stopped), outcome=None, post=[], after=[])
    assert (status, exit_code(status, reasons)) == ("refused", 3)


def test_an_exception_after_the_container_keeps_the_outcome_and_is_judged_with_it() -> None:
    """A stage that fails after the container exited (outcome.json cannot be written, say)
    still leaves the lock's hold and the outcome: the run is judged as it ran."""
    ctx = _ctx()
    held = Held(Path("gpu.lock"), "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", 0.5)

    def full_disk(c, keep) -> Launch:
        keep(Launch(held=held, outcome={"exit_code": 1}))
        raise OSError(errno.ENOSPC, "No space left on device")

    run_stages(ctx, (Stage("launch", full_disk), Stage("post", ok)))
    assert ctx.launch.held is held and ctx.outcome == {"exit_code": 1}
    assert [r.rule for r in ctx.after] == ["ENV-DISK-FULL"] and ctx.stopped == ()
    assert [s["name"] for s in ctx.stages] == ["launch"]


def test_an_exception_in_post_is_judged_with_the_outcome() -> None:
    ctx = _ctx()

    def post_crash(c, keep) -> Post:
        raise RuntimeError("bug")

    run_stages(ctx, (Stage("launch", lambda c, keep: Launch(outcome={"exit_code": 0})),
                     Stage("post", post_crash)))
    assert [r.rule for r in ctx.after] == ["HARNESS-ERROR"]
    assert ctx.after[0].detail == "stage post: RuntimeError: bug"


def test_a_signal_is_recorded_against_the_stage_it_cut_and_keeps_what_it_had() -> None:
    ctx = _ctx()

    def cut(c, keep) -> Post:
        keep(Post(("first",)))  # type: ignore[arg-type]
        raise Interrupted("SIGTERM")

    with pytest.raises(Interrupted):
        run_stages(ctx, (Stage("post", cut),))
    assert ctx.stages[0]["result"] == StageResult.INTERRUPTED
    assert ctx.post.results == ("first",)


def test_an_interruption_before_a_container_stops_the_run_and_after_marks_the_outcome() -> None:
    before = _ctx()
    before.interrupted("SIGINT")
    assert [(r.rule, r.detail) for r in before.stopped] == [
        (RUN_INTERRUPTED, "harness received SIGINT")]
    after = _ctx()
    after.took("launch", Launch(outcome={"exit_code": 0, "interrupted": False}))
    after.interrupted("SIGTERM")
    assert after.stopped == () and after.outcome == {"exit_code": 0, "interrupted": True,
                                                     "signal": "SIGTERM"}


def test_a_result_goes_only_where_its_stage_keeps_it() -> None:
    ctx = _ctx()
    with pytest.raises(TypeError):
        ctx.took("launch", Preflight())
    with pytest.raises(TypeError):
        ctx.took("elsewhere", Preflight())
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.took("preflight", Preflight()).image_id = "sha256:x"  # type: ignore[misc]


@pytest.mark.parametrize(("error", "rule"), [
    (EnvironmentFault("no engine", rule="ENV-NO-ENGINE"), "ENV-NO-ENGINE"),
    (EnvironmentFault("odd"), "ENV-ERROR"),
    (OSError(errno.ENOSPC, "No space left on device"), "ENV-DISK-FULL"),
    (ValueError("bug"), "HARNESS-ERROR"),
])
def test_error_reason_names_a_catalogued_rule(error: BaseException, rule: str) -> None:
    assert error_reason(error).rule == rule


def test_a_stage_judged_elsewhere_is_recorded_but_not_filed_twice() -> None:
    ctx = _ctx()
    ctx.took("launch", Launch(outcome={"exit_code": 0}))
    step = Reason("GATE0-FIELD-DIFFERS", "x differs", by="gate0")

    def post(c, keep) -> Post:
        return Post((PostResult("gate0", 1, Verdict.REFUSED, (step,)),))

    run_stages(ctx, (Stage("post", post, files=False),))
    assert ctx.after == () and ctx.stopped == ()
    assert ctx.stages[0] == {"name": "post", "result": "refused",
                             "seconds": ctx.stages[0]["seconds"],
                             "rules": ["GATE0-FIELD-DIFFERS"]}


def _context_writes(source: str) -> list[int]:
    """Lines that assign to, or mutate in place, an attribute of a run context (`ctx.X`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = []
        if isinstance(node, ast.Assign):
            targets = [e for t in node.targets
                       for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("append", "extend", "update", "setdefault")):
            targets = [node.func.value]
        for t in targets:
            while isinstance(t, ast.Subscript):
                t = t.value
            if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == "ctx"):
                found.append(node.lineno)
    return sorted(found)


def test_only_the_context_writes_the_context() -> None:
    """Stages return results; nothing but `RunContext`'s own methods stores them."""
    writes = [f"{p.relative_to(HARNESS)}:{line}" for p in sorted(HARNESS.rglob("*.py"))
              if p.name != "context.py" or p.parent.name != "pipeline"
              for line in _context_writes(p.read_text())]
    assert writes == []


def test_the_context_write_check_would_see_a_write() -> None:
    assert _context_writes("ctx.seal = 1\nctx.post.append(2)\nctx.a, b = 1, 2\n"
                           "ctx.outcome['x'] = 1\nctx.after += []\n") == [1, 2, 3, 4, 5]

"""verdict.json, one shape written and read back (harness.judge.verdictfile).

A built-in step writes its reasons as `{"rule", "detail"}` objects; the older text form
("RULE: detail") still reads, into the same typed result. Every reason read from a step's
file is the step's: an object claiming `by: harness` with an environment rule, or text
dressed as the harness's own, refuses like any other reason (exit 1), never exit 3.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.base.catalogue import ENV_NO_ENGINE, POST_REFUSED
from harness.base.errors import ENVIRONMENT, REFUSED
from harness.base.reason import HARNESS, Reason
from harness.base.states import Status, Verdict, exit_code
from harness.judge import verdictfile
from harness.judge.poststeps import exitcode
from harness.judge.verdict import decide
from harness.judge.verdictfile import MAX_REASONS, PostResult, read, result

OK = {"exit_code": 0, "oom_killed": False, "timed_out": False, "interrupted": False}


def _written(folder: Path, doc: object, step: str = "judge", code: int | None = 1
             ) -> PostResult:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verdict.json").write_text(json.dumps(doc))
    verdict, reasons, problem = read(folder, step)
    assert problem is None, problem
    return result(step, code, verdict, reasons, [])


def test_the_old_text_form_and_the_object_form_give_the_same_result(tmp_path: Path) -> None:
    old = _written(tmp_path / "old", {"schema": "harness.verdict/v1", "verdict": "refused",
                                      "reasons": ["GATE0-FIELD-DIFFERS: model.dtype differs",
                                                  "plain words"]})
    new = _written(tmp_path / "new", {"schema": verdictfile.SCHEMA, "verdict": "refused",
                                      "reasons": [{"rule": "GATE0-FIELD-DIFFERS",
                                                   "detail": "model.dtype differs"},
                                                  {"rule": "", "detail": "plain words"}]})
    assert old == new == PostResult("judge", 1, Verdict.REFUSED, (
        Reason("GATE0-FIELD-DIFFERS", "model.dtype differs", "judge"),
        Reason(POST_REFUSED, "plain words", "judge")))
    assert type(new.verdict) is Verdict


@pytest.mark.parametrize(("claim", "rule"), [
    ({"rule": ENV_NO_ENGINE, "by": HARNESS, "detail": "the engine is gone"}, ENV_NO_ENGINE),
    (f"{ENV_NO_ENGINE}: the engine is gone", ENV_NO_ENGINE),
    (f"[{HARNESS}] {ENV_NO_ENGINE}: the engine is gone", POST_REFUSED),  # names no rule
])
def test_a_step_claiming_the_harness_environment_rule_refuses_with_exit_1(
        tmp_path: Path, claim: object, rule: str) -> None:
    step = _written(tmp_path, {"verdict": "refused", "reasons": [claim]})
    assert [(r.rule, r.by) for r in step.reasons] == [(rule, "judge")]
    status, reasons = decide(preflight=[], outcome=OK, post=[step], after=[])
    assert status is Status.REFUSED and exit_code(status, reasons) == REFUSED
    own = Reason(ENV_NO_ENGINE, "the engine is gone")  # the harness's own finding does
    assert exit_code(*decide(preflight=[own], outcome=None, post=[], after=[])) == ENVIRONMENT


def test_a_step_that_wrote_no_verdict_is_judged_by_its_exit_code(tmp_path: Path) -> None:
    assert read(tmp_path, "judge") == (None, [], None)
    assert result("judge", 0, None, [], []).verdict is Verdict.ACCEPTED
    assert result("judge", 2, None, [], []).verdict is Verdict.REFUSED
    fault = Reason("POST-TIMEOUT", "killed", "judge")
    assert result("judge", 0, Verdict.ACCEPTED, [], [fault]) == PostResult(
        "judge", 0, Verdict.REFUSED, (fault,))


@pytest.mark.parametrize("reasons", [
    [{"rule": "not a rule", "detail": "x"}],
    [{"rule": "A-B" * 60, "detail": "x"}],
    [{"rule": "A-B"}],
    [{"rule": 3, "detail": "x"}],
    [{"rule": "A-B", "detail": ["x"]}],
    ["A-B: fine", None],
])
def test_a_reason_that_is_neither_text_nor_a_rule_and_detail_is_a_problem(
        tmp_path: Path, reasons: list) -> None:
    (tmp_path / "verdict.json").write_text(json.dumps({"verdict": "refused",
                                                       "reasons": reasons}))
    verdict, found, problem = read(tmp_path, "judge")
    assert (verdict, found) == (None, []) and problem is not None
    assert "reasons must be a list of strings or" in problem


def test_reasons_are_bounded_and_printable(tmp_path: Path) -> None:
    many = [{"rule": "A-B", "detail": f"x\x1b{i}" + "y" * 2000} for i in range(MAX_REASONS + 5)]
    (tmp_path / "verdict.json").write_text(json.dumps({"reasons": many}))
    _, found, problem = read(tmp_path, "judge")
    assert problem is None and len(found) == MAX_REASONS + 1
    assert all("\x1b" not in r.detail and len(r.detail) <= 1003 for r in found)
    assert found[-1] == Reason(POST_REFUSED, "(and 5 more reasons in verdict.json)", "judge")


def test_a_built_in_step_writes_objects_without_by(tmp_path: Path) -> None:
    (tmp_path / "outcome.json").write_text(json.dumps({**OK, "exit_code": 3}))
    out = tmp_path / "out"
    out.mkdir()
    assert exitcode.run(tmp_path, out, {}) == 1
    doc = json.loads((out / "verdict.json").read_text())
    assert doc == {"schema": "harness.verdict/v2", "verdict": "refused",
                   "reasons": [{"rule": "RUN-EXIT", "detail": "the container exited 3"}]}
    assert read(out, "exit-code")[1] == [Reason("RUN-EXIT", "the container exited 3",
                                               "exit-code")]

"""The rule catalogue is the only place a rule id is spelled, docs/rules.md is generated
from it, and the verdict reads exit classes from it: a post-step cannot claim the host was
at fault, and the exit-code post-step judges an exit exactly as the harness does."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from harness.base import catalogue
from harness.base.errors import ENVIRONMENT, REFUSED
from harness.base.reason import Reason
from harness.base.states import Verdict, exit_code
from harness.judge import verdictfile
from harness.judge.poststeps import exitcode
from harness.judge.verdict import decide, post_reasons
from harness.judge.verdictfile import PostResult

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
REGENERATE = ".venv/bin/python -m harness.base.catalogue --markdown > docs/rules.md"
# Upper-case, hyphenated words that are not rules.
NOT_RULES = frozenset({"SHA-256", "ISO-8601", "UTF-8"})
RULE_TEXT = re.compile(rf"^({catalogue.RULE_SHAPE})(?:$|: )")
OK = {"exit_code": 0, "oom_killed": False, "timed_out": False, "interrupted": False}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def rule_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant, f-string parts included, that spells a rule id
    or starts with `RULE-ID: `; docstrings are prose and may name rules."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and (m := RULE_TEXT.match(node.value))
                and m.group(1) not in NOT_RULES):
            found.append((node.lineno, node.value))
    return found


def test_docs_rules_md_is_generated_from_the_catalogue():
    text = (REPO / "docs" / "rules.md").read_text()
    assert text == catalogue.markdown(), f"docs/rules.md is stale; run: {REGENERATE}"


def test_the_scan_finds_a_rule_spelled_as_a_literal():
    source = ('"""RUN-EXIT in a docstring is prose."""\n'
              'a = "ENV-NO-ENGINE"\n'
              'b = f"GATE0-MISSING: {x} was not written"\n'
              'c = f"{e.rule or \'HARNESS-ERROR\'}: {e.message}"\n'
              'd = "SHA-256"\n'
              'e = "NOT-A-RULE-here but fine?"\n')
    assert rule_literals(source) == [(2, "ENV-NO-ENGINE"), (3, "GATE0-MISSING: "),
                                     (4, "HARNESS-ERROR")]


def test_no_module_spells_a_rule_id_outside_the_catalogue():
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(REPO)
        if path.name == "catalogue.py" and path.parent == HARNESS / "base":
            continue
        if rel.parts[:2] == ("harness", "instrument"):  # stdlib-only, runs in the container
            continue
        found += [f"{rel}:{line}: {text!r}" for line, text in rule_literals(path.read_text())]
    assert found == [], "use the harness.base.catalogue constant instead:\n" + "\n".join(found)


def test_every_rule_is_well_formed_and_exported_under_its_own_name():
    assert len(catalogue.RULES) >= 60
    for rule_id, rule in catalogue.RULES.items():
        assert re.fullmatch(catalogue.RULE_SHAPE, rule_id) and rule.id == rule_id
        assert getattr(catalogue, rule_id.replace("-", "_")) == rule_id
        assert rule.meaning and "\n" not in rule.meaning and rule.area


def test_every_environment_rule_exits_3_and_only_those():
    env = [r for r in catalogue.RULES if r.startswith("ENV-")]
    assert len(env) >= 15
    assert [r for r in env if catalogue.exit_class(r) != ENVIRONMENT] == []
    others = [r for r in catalogue.RULES if not r.startswith("ENV-")]
    assert [r for r in others if catalogue.exit_class(r) == ENVIRONMENT] == []
    assert catalogue.exit_class("SOME-STEP-RULE") == REFUSED


def test_split_reads_only_a_leading_rule_id():
    assert Reason.of("GATE0-FIELD-DIFFERS: a: b") == Reason("GATE0-FIELD-DIFFERS", "a: b")
    assert Reason.of("no rule: here") == Reason("", "no rule: here")
    assert Reason.of("ENV-X:no space") == Reason("", "ENV-X:no space")


def test_a_refused_gate0_step_keeps_its_own_rule():
    gate0 = PostResult("gate0", 1, Verdict.REFUSED, (Reason(
        "GATE0-FIELD-DIFFERS", "compilation.custom_ops differs (value)", "gate0"),))
    status, reasons = decide(preflight=[], outcome=OK, post=[gate0], after=[])
    assert status == "refused"
    assert reasons == [Reason("GATE0-FIELD-DIFFERS", "compilation.custom_ops differs (value)",
                              "gate0")]
    assert reasons[0].as_dict() == {"rule": "GATE0-FIELD-DIFFERS", "by": "gate0",
                                    "detail": "compilation.custom_ops differs (value)"}


def test_a_post_step_cannot_claim_the_environment():
    step = PostResult("judge", 1, Verdict.REFUSED, (Reason("ENV-NO-ENGINE", "x", "judge"),))
    status, reasons = decide(preflight=[], outcome=OK, post=[step], after=[])
    assert [(r.rule, r.by) for r in reasons] == [("ENV-NO-ENGINE", "judge")]
    assert exit_code(status, reasons) == 1
    own = [Reason(catalogue.ENV_NO_ENGINE, "x")]  # the harness's own finding does
    assert exit_code(*decide(preflight=own, outcome=None, post=[], after=[])) == 3


def test_a_refusing_post_step_without_reasons_is_post_refused():
    assert post_reasons(PostResult("judge", 2, None)) == [
        Reason("POST-REFUSED", "exited 2", "judge")]
    words = Reason("POST-REFUSED", "plain words", "judge")
    assert post_reasons(PostResult("judge", 0, Verdict.REFUSED, (words,))) == [words]
    ignored = Reason("RUN-EXIT", "ignored", "judge")
    assert post_reasons(PostResult("judge", 0, Verdict.ACCEPTED, (ignored,))) == []


OUTCOMES = [
    (OK, "accepted", []),
    ({**OK, "exit_code": 3}, "failed", ["RUN-EXIT: the container exited 3"]),
    ({**OK, "exit_code": None}, "failed", ["RUN-EXIT: no exit code was recorded"]),
    ({}, "failed", ["RUN-EXIT: no exit code was recorded"]),
    ({**OK, "exit_code": 137, "oom_killed": True}, "failed",
     ["RUN-OOM: the container was killed for memory"]),
    ({**OK, "exit_code": 137, "timed_out": True, "oom_killed": True}, "timed-out",
     ["RUN-TIMEOUT: the container ran past its timeout"]),
    ({**OK, "exit_code": None, "interrupted": True, "timed_out": True}, "interrupted",
     ["RUN-INTERRUPTED: the harness was stopped during the run"]),
    ({**OK, "exit_code": None, "interrupted": True, "signal": "SIGHUP"}, "interrupted",
     ["RUN-INTERRUPTED: the harness was stopped by SIGHUP during the run"]),
]


@pytest.mark.parametrize(("outcome", "status", "reasons"), OUTCOMES)
def test_judge_exit_and_the_exit_code_step_agree(outcome, status, reasons):
    got_status, got = exitcode.judge_exit(outcome)
    assert (got_status, [str(r) for r in got]) == (status, reasons)
    verdict, found = exitcode.judge(outcome)
    assert (verdict, found) == ("refused" if reasons else "accepted", got)


@pytest.mark.parametrize(("outcome", "status", "reasons"), OUTCOMES)
def test_the_exit_code_step_writes_the_harness_reasons(tmp_path, outcome, status, reasons):
    (tmp_path / "outcome.json").write_text(json.dumps(outcome))
    out = tmp_path / "out"
    out.mkdir()
    code = exitcode.run(tmp_path, out, {})
    verdict = json.loads((out / "verdict.json").read_text())
    assert (code, [f"{r['rule']}: {r['detail']}" for r in verdict["reasons"]]) == (
        1 if reasons else 0, reasons)
    assert all(set(r) == {"rule", "detail"} for r in verdict["reasons"])  # no `by`
    said, written, problem = verdictfile.read(out, "exit-code")
    step = verdictfile.result("exit-code", code, said, written, [])
    _, all_reasons = decide(preflight=[], outcome=outcome, post=[step], after=[])
    assert sorted({r.rule for r in all_reasons}) == sorted(r["rule"] for r in verdict["reasons"])
    assert problem is None and {r.by for r in written} <= {"exit-code"}


def test_the_exit_code_step_reads_a_broken_outcome_as_no_exit_code(tmp_path):
    (tmp_path / "outcome.json").write_text("[1]")
    assert exitcode.run(tmp_path, tmp_path, {}) == 1
    assert json.loads((tmp_path / "verdict.json").read_text())["reasons"] == [
        {"rule": "RUN-EXIT", "detail": "no exit code was recorded"}]

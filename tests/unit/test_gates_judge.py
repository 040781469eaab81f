"""The pure gate judge: exit codes, JUnit XML (hostile too), the kill score, thresholds; the
gate schema; the gate record's strict reader."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from harness.base.errors import InvalidInput
from harness.config.gatelist import Gate, GateList
from harness.judge.gaterecord.gatesjson import SCHEMA, parse
from harness.judge.gaterecord.onegate import MAX_JUNIT, GateRun, judge, junit_counts, kill_score
from harness.judge.gaterecord.outcome import exit_code, select

JUNIT_OK = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="1" tests="3">
<testcase classname="t" name="a"/><testcase classname="t" name="b"/>
<testcase classname="t" name="c"><skipped message="no"/></testcase>
</testsuite></testsuites>"""


def gate(**expect) -> Gate:
    return Gate(name="g", run=["true"], timeout=60, expect=expect)


def out(code: int | None = 0, **kw) -> GateRun:
    return GateRun(code, 1.0, **kw)


# --- exit codes and timeouts -----------------------------------------------------------------

def test_exit_zero_passes_and_nonzero_fails_with_why():
    assert judge(gate(), out(0)).passed
    v = judge(gate(), out(2))
    assert not v.passed and v.why == "exited 2, expected 0"


def test_expected_nonzero_exit_code():
    assert judge(gate(exit_code=1), out(1)).passed
    assert judge(gate(exit_code=1), out(0)).why == "exited 0, expected 1"


def test_an_interrupted_gate_fails_whatever_its_exit():
    v = judge(gate(), out(0, interrupted=True))
    assert not v.passed and v.why.startswith("interrupted by the operator")
    assert exit_code([{"passed": False}], [out(None, interrupted=True)]) == 3


def test_timeout_and_start_error_fail():
    assert "timeout" in judge(gate(), out(None, timed_out=True)).why
    v = judge(gate(), out(None, start_error="nope: No such file or directory"))
    assert not v.passed and v.why.startswith("could not start: nope")


# --- JUnit -------------------------------------------------------------------------------------

def test_junit_counts_testcases():
    assert junit_counts(JUNIT_OK) == {"tests": 3, "failures": 0, "errors": 0, "skipped": 1}


def test_junit_passes_and_counts_only_executed_tests():
    assert judge(gate(junit="junit.xml", min_tests=2), out(junit=JUNIT_OK)).passed
    v = judge(gate(junit="junit.xml", min_tests=3), out(junit=JUNIT_OK))
    assert not v.passed and v.why == "JUnit junit.xml: 2 test(s) ran, fewer than the 3 required"
    assert v.counts["tests"] == 3


def test_junit_failure_and_error_fail():
    xml = (b"<testsuite><testcase name='a'><failure message='x'/></testcase>"
           b"<testcase name='b'><error/></testcase><testcase name='c'/></testsuite>")
    v = judge(gate(junit="j.xml"), out(junit=xml))
    assert not v.passed and v.why == "JUnit j.xml: 1 failure(s) and 1 error(s)"


def test_junit_declared_errors_count_even_without_testcases():
    xml = (b'<testsuites><testsuite errors="1" tests="5"><testcase name="a"/></testsuite>'
           b"</testsuites>")
    assert junit_counts(xml)["errors"] == 1
    assert not judge(gate(junit="j.xml"), out(junit=xml)).passed


def test_forged_tests_attribute_counts_for_nothing():
    xml = b'<testsuite tests="1000" failures="0"></testsuite>'
    v = judge(gate(junit="j.xml"), out(junit=xml))
    assert not v.passed and "0 test(s) ran" in v.why


def test_junit_missing_or_unreadable():
    assert judge(gate(junit="j.xml"), out()).why == "JUnit j.xml: not written"
    v = judge(gate(junit="j.xml"), out(junit_problem="a symlink"))
    assert v.why == "JUnit j.xml: a symlink"


def test_exit_code_and_junit_reasons_both_named():
    v = judge(gate(junit="j.xml"), out(1))
    assert v.why == "exited 1, expected 0; JUnit j.xml: not written"


@pytest.mark.parametrize("xml", [
    # billion laughs
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
    b"<testsuite><testcase name='&lol2;'/></testsuite>",
    # external entity
    b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    b"<testsuite><testcase name='&x;'/></testsuite>",
    # a bare DTD
    b'<!DOCTYPE testsuite SYSTEM "http://example.invalid/x.dtd"><testsuite/>',
])
def test_hostile_xml_is_refused_never_expanded(xml):
    found = junit_counts(xml)
    assert isinstance(found, str) and found.startswith("refused XML")
    assert not judge(gate(junit="j.xml"), out(junit=xml)).passed


def test_huge_and_malformed_xml_refused():
    assert "over the" in junit_counts(b" " * (MAX_JUNIT + 1))
    assert junit_counts(b"<testsuite>").startswith("not well-formed")
    assert "not <testsuites>" in junit_counts(b"<html/>")


# --- the kill score ------------------------------------------------------------------------------

def test_kill_score_from_k_over_t_last_line_wins():
    text = ("mutation: killed 1/10 = 10.0% ({})\n  survived: x\n"
            "mutation: killed 141/142 = 99.3% ({'killed': 141})\n")
    assert kill_score(text) == pytest.approx(99.3, abs=0.01)


def test_printed_percentage_is_not_trusted():
    assert kill_score("mutation: killed 1/2 = 99.9% ({})") == 50.0


@pytest.mark.parametrize("text", ["", "killed 9/10", "mutation: killed 0/0 = 0.0%",
                                  "mutation: killed 11/10 = 110%", " mutation: killed 9/9 = 100%"])
def test_no_usable_kill_line(text):
    assert isinstance(kill_score(text), str)


def test_min_kill_score_threshold():
    g = gate(min_kill_score=95)
    v = judge(g, out(stdout="mutation: killed 95/100 = 95.0% ({})\n"))
    assert v.passed and v.kill_score == 95.0
    v = judge(g, out(stdout="mutation: killed 94/100 = 94.0% ({})\n"))
    assert not v.passed and v.why == "kill score 94% is below the minimum 95%"
    assert judge(g, out(stdout="")).why.startswith("kill score: no `mutation")


# --- schema ----------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    {"name": "g", "run": "make test", "timeout": 60},
    {"name": "g", "run": [], "timeout": 60},
    {"name": "gates.json", "run": ["x"], "timeout": 60},
    {"name": "g", "run": ["x"], "timeout": "forever"},
    {"name": "g", "run": ["x"], "timeout": 60, "cwd": "../out"},
    {"name": "g", "run": ["x"], "timeout": 60, "expect": {"junit": "/etc/x.xml"}},
    {"name": "g", "run": ["x"], "timeout": 60, "expect": {"min_tests": 3}},
    {"name": "g", "run": ["x"], "timeout": 60, "expect": {"min_kill_score": 101}},
    {"name": "g", "run": ["x"], "timeout": 60, "shell": True},
])
def test_gate_schema_refuses(bad):
    with pytest.raises(ValidationError):
        Gate.model_validate(bad)


def test_gate_names_unique_case_insensitively():
    with pytest.raises(ValidationError, match="two gates"):
        GateList.model_validate({"gates": [{"name": "A", "run": ["x"], "timeout": 1},
                                           {"name": "a", "run": ["y"], "timeout": 1}]})


def test_select_keeps_order_and_refuses_unknown():
    gates = [Gate(name=n, run=["x"], timeout=1) for n in ("a", "b", "c")]
    assert [g.name for g in select(gates, ("c", "a"))] == ["a", "c"]
    with pytest.raises(InvalidInput, match="no such gate"):
        select(gates, ("d",))


def test_exit_code_three_when_a_gate_could_not_start():
    assert exit_code([{"passed": True}], [out()]) == 0
    assert exit_code([{"passed": False}], [out(1)]) == 1
    assert exit_code([{"passed": False}], [out(None, start_error="x")]) == 3


# --- the record's strict reader ------------------------------------------------------------

def record(**over) -> dict:
    doc = {"schema": SCHEMA, "campaign": {"name": "c", "file": "c.yaml"},
           "source_seal": "sha256:" + "a" * 64,
           "git": {"commit": "c" * 40, "clean": True, "problems": [], "problems_total": 0},
           "times": {"started": "t0", "ended": "t1"}, "passed": True, "refusals": [],
           "gates": [{"name": "g", "argv": ["x"], "exit_code": 0, "passed": True,
                      "duration_s": 1.5, "counts": None, "kill_score": None,
                      "min_kill_score": None, "why": None}]}
    doc.update(over)
    return doc


def test_record_round_trip():
    assert parse(json.dumps(record()).encode(), "r")["passed"] is True


@pytest.mark.parametrize("data", [
    b"[]", b"{", b'{"a": NaN}', b'{"a": 1, "a": 2}', b"\xff",
    json.dumps(record(passed=False)).encode(),  # disagrees with its gates
    json.dumps(record(passed="yes")).encode(),
    json.dumps(record(source_seal="sha256:xyz")).encode(),
    json.dumps(record(schema="harness.gates/v0")).encode(),
    json.dumps(record(gates=[])).encode(),  # an empty record passes nothing
    json.dumps(record(gates=[{"name": "g"}])).encode(),
    json.dumps(record(extra=1)).encode(),
    # what `gates` itself refused makes the record fail: it cannot also say passed
    json.dumps(record(refusals=[{"rule": "GATES-SEAL-CHANGED", "detail": "x"}])).encode(),
    json.dumps(record(refusals=["GATES-SEAL-CHANGED"])).encode(),
    json.dumps(record(git={"commit": "c" * 40})).encode(),  # v2 says whether it was clean
    json.dumps(record(git={"commit": "c", "clean": "yes", "problems": [],
                           "problems_total": 0})).encode(),
    b'{"x":' * 50 + b"1" + b"}" * 50,
])
def test_record_reader_refuses_malformed(data):
    with pytest.raises(InvalidInput):
        parse(data, "r")

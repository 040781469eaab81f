"""The status decision is pure: each rule can be seen to decide."""

from __future__ import annotations

from harness.base.reason import Reason
from harness.base.states import Status, Verdict, exit_code
from harness.judge.verdict import decide
from harness.judge.verdictfile import PostResult

OK = {"exit_code": 0, "oom_killed": False, "timed_out": False, "interrupted": False}


def test_accepted_when_all_is_well():
    status, reasons = decide(preflight=[], outcome=OK, post=[PostResult("exit-code", 0,
                                                                        Verdict.ACCEPTED)],
                             after=[])
    assert (status, reasons) == (Status.ACCEPTED, []) and type(status) is Status
    assert exit_code(status, reasons) == 0


def test_preflight_refusal_means_not_launched():
    r = [Reason("IMAGE-ID-MISMATCH", "x")]
    status, reasons = decide(preflight=r, outcome=None, post=[], after=[])
    assert status == "refused" and reasons == r and exit_code(status, reasons) == 1


def test_environment_reasons_exit_3():
    status, reasons = decide(preflight=[Reason("ENV-MISSING-IMAGE", "x")], outcome=None,
                             post=[], after=[])
    assert exit_code(status, reasons) == 3


def test_nonzero_exit_is_failed_and_oom_named():
    s, r = decide(preflight=[], outcome={**OK, "exit_code": 3}, post=[], after=[])
    assert s == "failed" and r[0].rule == "RUN-EXIT"
    s, r = decide(preflight=[], outcome={**OK, "exit_code": 137, "oom_killed": True}, post=[],
                  after=[])
    assert s == "failed" and r[0].rule == "RUN-OOM"


def test_timeout_and_interrupt_take_precedence():
    s, _ = decide(preflight=[], outcome={**OK, "exit_code": 137, "timed_out": True}, post=[],
                  after=[])
    assert s == "timed-out"
    s, _ = decide(preflight=[], outcome={**OK, "interrupted": True, "timed_out": True},
                  post=[], after=[])
    assert s == "interrupted"
    s, _ = decide(preflight=[Reason("RUN-INTERRUPTED", "SIGTERM")], outcome=None, post=[],
                  after=[])
    assert s == "interrupted"


def test_a_refusing_post_step_refuses_and_is_named():
    s, r = decide(preflight=[], outcome=OK,
                  post=[PostResult("gate0", 1, Verdict.REFUSED,
                                   (Reason("GATE0-FIELD-DIFFERS", "x", "gate0"),))],
                  after=[])
    assert s == "refused" and [(x.rule, x.by, x.detail) for x in r] == [
        ("GATE0-FIELD-DIFFERS", "gate0", "x")]


def test_a_changed_seal_refuses_an_otherwise_good_run():
    s, r = decide(preflight=[], outcome=OK, post=[],
                  after=[Reason("SEAL-CHANGED", "harness/x.py: changed")])
    assert s == "refused" and r[0].rule == "SEAL-CHANGED"


def test_a_post_step_that_exits_0_but_says_refused_refuses_the_run():
    status, reasons = decide(preflight=[], outcome=OK,
                             post=[PostResult("judge", 0, Verdict.REFUSED,
                                              (Reason("JUDGE-X", "no", "judge"),))],
                             after=[])
    assert status == "refused" and [(r.rule, r.by) for r in reasons] == [("JUDGE-X", "judge")]

"""A post-step command is a program: whatever it leaves as verdict.json or result.json
(a list, a huge or deep document, a FIFO, a symlink, a folder) refuses the step with a
named rule, and the run is still sealed with that refusal; nothing crashes the run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.base.reason import Reason
from harness.config.schema import PostStep
from harness.judge.verdict import decide
from harness.judge.verdictfile import VERDICT_LIMIT, read
from harness.measure.runfolder.manifest import verify_folder
from harness.pipeline.post import run_one

OUTCOME = {"exit_code": 0, "oom_killed": False, "timed_out": False, "interrupted": False}


def _write(out: Path, what: str) -> None:
    path = out / "verdict.json"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "symlink":
        (out / "real.json").write_text('{"verdict": "accepted"}')
        path.symlink_to("real.json")
    elif what == "folder":
        path.mkdir()
    elif what == "huge":
        path.write_text('{"verdict": "accepted", "pad": "' + "x" * VERDICT_LIMIT + '"}')
    elif what == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        path.write_bytes(what.encode("utf-8", "surrogateescape"))


HOSTILE = {
    "list": "[1]", "string": '"accepted"', "null": "null", "number": "1",
    "not-json": "{", "nan": '{"verdict": "accepted", "x": NaN}',
    "duplicate-key": '{"verdict": "refused", "verdict": "accepted"}',
    "long-integer": '{"verdict": "accepted", "n": ' + "9" * 5000 + "}",
    "bad-verdict": '{"verdict": ["accepted"]}', "other-verdict": '{"verdict": "fine"}',
    "reasons-not-list": '{"verdict": "accepted", "reasons": "ok"}',
    "reasons-not-strings": '{"verdict": "accepted", "reasons": [{"a": 1}]}',
    "reason-rule-not-an-id": '{"verdict": "refused", "reasons": [{"rule": "a b", '
                             '"detail": "x"}]}',
    "reason-detail-not-text": '{"verdict": "refused", "reasons": [{"rule": "A-B", '
                              '"detail": 1}]}',
    "one-reason-of-many-bad": '{"verdict": "refused", "reasons": ["A-B: x", 1]}',
    "not-utf8": '{"verdict": "accepted", "x": "\udcff"}',
    "fifo": "fifo", "symlink": "symlink", "folder": "folder", "huge": "huge", "deep": "deep",
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_read_verdict_names_every_odd_file_and_never_raises(tmp_path, what):
    _write(tmp_path, HOSTILE[what])
    verdict, reasons, problem = read(tmp_path, "judge")
    assert problem and verdict is None and reasons == []
    assert "\n" not in problem and len(problem) < 1200


def test_read_verdict_reads_a_good_file_and_no_file(tmp_path):
    assert read(tmp_path, "judge") == (None, [], None)
    (tmp_path / "verdict.json").write_text(json.dumps(
        {"verdict": "refused", "reasons": [{"rule": "A-ONE", "detail": "one"}, "B-TWO: two"],
         "extra": [1]}))
    assert read(tmp_path, "judge") == ("refused", [Reason("A-ONE", "one", "judge"),
                                                   Reason("B-TWO", "two", "judge")], None)


def _ctx(tmp_path: Path) -> SimpleNamespace:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return SimpleNamespace(run_dir=run_dir,
                           loaded=SimpleNamespace(campaign=SimpleNamespace(contract=None)))


def _step(code: str) -> PostStep:
    return PostStep(name="judge", run=[sys.executable, "-c", code], timeout=60)


WRITE = "import os; p = os.environ['HARNESS_POSTSTEP_DIR'] + '/{name}'; "


@pytest.mark.parametrize(("name", "body", "rule"), [
    ("verdict.json", "open(p, 'w').write('[1]')", "POST-VERDICT-UNREADABLE"),
    ("verdict.json", "os.mkfifo(p)", "POST-VERDICT-UNREADABLE"),
    ("verdict.json", "os.symlink('/etc/passwd', p)", "POST-VERDICT-UNREADABLE"),
    ("result.json", "open(p, 'w').write('[1]')", "POST-RESULT-TAKEN"),
    ("result.json", "os.mkdir(p); open(p + '/x', 'w').write('x')", "POST-RESULT-UNWRITTEN"),
])
def test_run_one_refuses_a_step_that_exits_0_with_odd_files(tmp_path, name, body, rule):
    result = run_one(_step(WRITE.format(name=name) + body), _ctx(tmp_path))
    assert result.verdict == "refused" and result.exit_code == 0  # the real exit code
    assert any(r.rule == rule and r.by == "judge" for r in result.reasons), result.reasons
    status, reasons = decide(preflight=[], outcome=OUTCOME, post=[result], after=[])
    assert status == "refused"
    assert reasons[-1].rule == rule and {r.by for r in reasons} == {"judge"}, reasons


def test_run_one_refuses_when_an_earlier_step_took_the_folder(tmp_path):
    ctx = _ctx(tmp_path)
    (ctx.run_dir / "post-steps").symlink_to(tmp_path)
    result = run_one(_step("pass"), ctx)
    assert result.verdict == "refused" and result.reasons[0].rule == "POST-DIR-TAKEN"
    assert not (tmp_path / "judge").exists()


def test_run_one_refuses_a_step_killed_at_its_timeout_whatever_it_wrote(tmp_path):
    body = ("open(p, 'w').write('{\"verdict\": \"accepted\"}'); "
            "import time; time.sleep(30)")
    step = PostStep(name="judge", run=[sys.executable, "-c", WRITE.format(name="verdict.json")
                                       + body], timeout=1)
    result = run_one(step, _ctx(tmp_path))
    assert (result.exit_code, result.verdict) == (None, "refused")
    status, reasons = decide(preflight=[], outcome=OUTCOME, post=[result], after=[])
    assert status == "refused"
    assert [(r.rule, r.by) for r in reasons] == [("POST-TIMEOUT", "judge")], reasons


def test_run_one_keeps_a_well_formed_verdict(tmp_path):
    body = ("open(p, 'w').write('{\"verdict\": \"accepted\", \"reasons\": []}')")
    result = run_one(_step(WRITE.format(name="verdict.json") + body), _ctx(tmp_path))
    assert (result.exit_code, result.verdict, result.reasons) == (0, "accepted", ())
    assert decide(preflight=[], outcome=OUTCOME, post=[result], after=[]) == ("accepted", [])


@pytest.mark.docker
def test_engine_run_with_a_post_step_writing_a_list_is_sealed_refused(project):
    script = ("import os; open(os.environ['HARNESS_POSTSTEP_DIR'] + '/verdict.json', 'w')"
              ".write('[1]')")
    project.control("judged", f"""\
        command: [python3, -c, "print('ok')"]
        timeout: 2m
        post_steps:
          - name: judge
            run: [{sys.executable}, -c, {json.dumps(script)}]
        """)
    camp = project.campaign("camp", ["judged"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "HARNESS-ERROR" not in r.stdout + r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "refused", rec["reasons"]
    assert rec["rules"] == ["POST-VERDICT-UNREADABLE"], rec["reasons"]
    assert "HARNESS-ERROR" not in json.dumps(rec)
    assert (run / "SHA256SUMS").is_file() and verify_folder(run) == []
    assert project.harness("verify", str(run)).returncode == 0

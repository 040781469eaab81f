"""The built-in `exit-code` post-step runs inside the harness (poststeps.IN_PROCESS): its
record is the one a child process leaves (result.json keys, verdict.json, stdout.log,
stderr.log), and whatever stands at outcome.json cannot hang, flood or crash the harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.config.schema import PostStep
from harness.judge.poststeps import IN_PROCESS, exitcode
from harness.measure.runfolder import layout
from harness.pipeline import post
from harness.pipeline.post import run_one

ACCEPTED = {"exit_code": 0, "oom_killed": False, "timed_out": False, "interrupted": False}


def _ctx(tmp_path: Path, outcome: object) -> SimpleNamespace:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    if outcome is not None:
        (run_dir / layout.OUTCOME).write_text(json.dumps(outcome))
    return SimpleNamespace(run_dir=run_dir,
                           loaded=SimpleNamespace(campaign=SimpleNamespace(contract=None)))


def _child(run_dir: Path, out_dir: Path) -> tuple[int, str]:
    """The same step as its own process, as the pipeline ran it before."""
    r = subprocess.run([sys.executable, "-m", "harness.judge.poststeps", "exit-code", str(run_dir),
                        str(out_dir), "--options", "{}"], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout


def test_only_exit_code_runs_in_process() -> None:
    assert sorted(IN_PROCESS) == ["exit-code"]  # gate0, image-gate, reference: workload files


def test_it_starts_no_process(tmp_path, monkeypatch) -> None:
    def no_process(*_a, **_k):
        raise AssertionError("a process was started")

    monkeypatch.setattr(post, "subprocess", SimpleNamespace(Popen=no_process))
    result = run_one(PostStep(name="exit-code"), _ctx(tmp_path, ACCEPTED))
    assert (result.exit_code, result.verdict) == (0, "accepted")


@pytest.mark.parametrize("outcome", [
    ACCEPTED, {**ACCEPTED, "exit_code": 3}, {**ACCEPTED, "oom_killed": True},
    {**ACCEPTED, "timed_out": True}, {}, [1], None,
])
def test_the_record_is_the_one_a_child_process_leaves(tmp_path, outcome) -> None:
    ctx = _ctx(tmp_path, outcome)
    result = run_one(PostStep(name="exit-code"), ctx)
    out = ctx.run_dir / layout.POST_STEPS / "exit-code"
    code, printed = _child(ctx.run_dir, tmp_path / "child")
    assert result.exit_code == code
    assert result.verdict == ("accepted" if code == 0 else "refused")
    assert sorted(os.listdir(out)) == sorted([layout.RESULT, layout.VERDICT,
                                              layout.STDOUT_LOG, layout.STDERR_LOG])
    assert (out / layout.VERDICT).read_text() == \
        (tmp_path / "child" / layout.VERDICT).read_text()
    assert (out / layout.STDOUT_LOG).read_text().splitlines()[-1] == printed.splitlines()[-1]
    assert (out / layout.STDERR_LOG).read_text() == ""
    record = json.loads((out / layout.RESULT).read_text())
    assert set(record) == {"name", "argv", "exit_code", "verdict", "duration_s", "note"}
    assert record["argv"][1:5] == ["-m", "harness.judge.poststeps", "exit-code", str(ctx.run_dir)]
    assert (record["exit_code"], record["note"]) == (code, None)


@pytest.mark.parametrize("what", ["fifo", "symlink", "huge", "folder", "deep", "nan"])
def test_a_hostile_outcome_file_is_refused_at_once(tmp_path, what) -> None:
    ctx = _ctx(tmp_path, None)
    path = ctx.run_dir / layout.OUTCOME
    if what == "fifo":
        os.mkfifo(path)  # a plain read would block the harness for ever
    elif what == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps(ACCEPTED))
        path.symlink_to(tmp_path / "elsewhere.json")
    elif what == "huge":
        path.write_text(json.dumps({**ACCEPTED, "pad": "x" * exitcode.OUTCOME_LIMIT}))
    elif what == "folder":
        path.mkdir()
    elif what == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        path.write_text('{"exit_code": NaN}')
    result = run_one(PostStep(name="exit-code"), ctx)
    assert (result.exit_code, result.verdict) == (1, "refused")
    assert [(r.rule, r.detail, r.by) for r in result.reasons] == [
        ("RUN-EXIT", "no exit code was recorded", "exit-code")]
    log = (ctx.run_dir / layout.POST_STEPS / "exit-code" / layout.STDOUT_LOG).read_text()
    assert "cannot read the outcome" in log


def test_a_crash_in_the_judge_refuses_the_step_with_its_traceback(tmp_path,
                                                                  monkeypatch) -> None:
    def broken(*_a, **_k):
        raise RuntimeError("judge bug")

    monkeypatch.setattr(exitcode, "run", broken)
    ctx = _ctx(tmp_path, ACCEPTED)
    result = run_one(PostStep(name="exit-code"), ctx)
    assert (result.exit_code, result.verdict) == (1, "refused")
    err = (ctx.run_dir / layout.POST_STEPS / "exit-code" / layout.STDERR_LOG).read_text()
    assert "RuntimeError: judge bug" in err

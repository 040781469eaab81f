"""The job script of several runs (a `same_host` group, a slot's next controls), run by a
real /bin/sh with a stand-in harness.

One job, each member's own `harness run --run-id R --attempt N`, in order on the node Slurm
gave it; the next member starts once the one before holds the GPU lock (the empty file it
makes then) and is told which run is before it; each member exported once sealed; Slurm's TERM
reaches the members running then, no later member starts and none launches after it; the
job exits with the worst member's code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.measure.slurm import job
from harness.measure.slurm import script as jobscript
from harness.measure.slurm.job import ControlTime, JobSpec, Site

RUNS = (("ctl-20261130T021501Z-0a1b2c3d", 1), ("ref-20261130T021502Z-4e5f6a7b", 2))
SPEC = JobSpec(night="n-20261130T021500Z", campaign_file="c.yaml", slot=3, attempt=2,
               controls=(ControlTime("ctl", 60, 5), ControlTime("ref", 60, 5)), runs=RUNS)

STAND_IN = """#!/bin/sh
tmp={tmp}
if [ "$1" = run ]; then
  args="$*"
  while [ $# -gt 0 ]; do [ "$1" != --run-id ] || rid=$2; shift; done
  seal() {{ mkdir -p "$tmp/runs/$rid"; : > "$tmp/runs/$rid/SHA256SUMS"; }}
  trap 'echo "term $rid" >> "$tmp/log"; seal; exit 7' TERM
  echo "run $args after=${{HARNESS_AFTER_RUN:-}} claims=${{HARNESS_CLAIMS:-}}" >> "$tmp/log"
  # the GPU lock: the member before must have exited (its done file) before this one holds it
  while [ -n "${{HARNESS_AFTER_DONE:-}}" ] && [ ! -e "$HARNESS_AFTER_DONE" ]; do sleep 0.05; done
  : > "$HARNESS_LOCKED_MARK"
  echo "stderr of $rid" >&2
  echo "launch $rid" >> "$tmp/log"
  if [ -f "$tmp/wait-$rid" ]; then while :; do sleep 0.05; done; fi
  seal
  exit "$(cat "$tmp/code-$rid" 2>/dev/null || echo 0)"
fi
echo "$1 $2 $3" >> "$tmp/log"
"""


def _script(tmp: Path) -> Path:
    exe = tmp / "fake-harness"
    exe.write_text(STAND_IN.format(tmp=tmp))
    exe.chmod(0o755)
    site = Site(harness=str(exe), workdir=str(tmp), runs_dir=str(tmp / "runs"),
                drop=str(tmp / "drop"))
    script = tmp / "job.sh"
    script.write_text(jobscript.job_script(SPEC, site))
    return script


def test_each_member_runs_its_own_run_in_order_and_is_exported(tmp_path) -> None:
    script = _script(tmp_path)
    (tmp_path / f"code-{RUNS[0][0]}").write_text("1")  # the first member refused: go on
    done = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1, done.stderr  # the worst member's code
    lines = (tmp_path / "log").read_text().splitlines()
    runs = [line.split() for line in lines if line.startswith("run ")]
    assert [line for line in lines if line.startswith("launch ")] == [
        f"launch {run_id}" for run_id, _ in RUNS]
    for i, (run_id, attempt) in enumerate(RUNS):
        words = runs[i]
        assert words[words.index("--control") + 1] == ("ctl", "ref")[i]
        assert words[words.index("--run-id") + 1] == run_id
        assert words[words.index("--attempt") + 1] == str(attempt)
        assert f"claims={tmp_path}/drop/claims" in words
        assert f"bundle export {tmp_path}/runs/{run_id}" in lines
    assert "after=" in runs[0]  # the first member waits for no verdict
    assert f"after={tmp_path}/runs/{RUNS[0][0]}" in runs[1]
    assert all(f"stderr of {r}" in done.stderr for r, _ in RUNS)  # each member's lines kept


def _started(tmp_path, said: tuple[str, ...], what: str) -> tuple[subprocess.Popen, Path]:
    """The job's shell started with its first member held running, once its log says each
    of `said` (within 10 s)."""
    script = _script(tmp_path)
    (tmp_path / f"wait-{RUNS[0][0]}").touch()
    shell = subprocess.Popen(["/bin/sh", str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    log, deadline = tmp_path / "log", time.monotonic() + 10
    while not (log.exists() and all(s in log.read_text() for s in said)):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return shell, log


def test_the_next_member_starts_while_the_one_before_runs(tmp_path) -> None:
    """Prestart: the second `harness run` is up (waiting on the lock) while the first runs."""
    shell, log = _started(tmp_path, (f"--run-id {RUNS[1][0]}",),
                          "the second member was not started early")
    assert f"launch {RUNS[1][0]}" not in log.read_text()  # it waits: the first holds the GPU
    os.kill(shell.pid, signal.SIGTERM)
    shell.communicate(timeout=30)


def test_term_stops_the_running_members_and_none_launches_after_it(tmp_path) -> None:
    shell, log = _started(tmp_path, (f"launch {RUNS[0][0]}", RUNS[1][0]),
                          "the members never started")
    time.sleep(0.2)  # the shell is in `wait` now
    os.kill(shell.pid, signal.SIGTERM)  # --signal=B:TERM signals the batch shell alone
    _, err = shell.communicate(timeout=30)
    assert shell.returncode == 7, err  # the harness's own code, after it sealed
    text = log.read_text()
    assert f"term {RUNS[0][0]}" in text and f"term {RUNS[1][0]}" in text
    assert f"launch {RUNS[1][0]}" not in text, "a member launched after the stop"


def test_the_group_job_asks_time_for_each_members_start() -> None:
    one = JobSpec(night=SPEC.night, campaign_file="c.yaml", slot=3, attempt=2,
                  controls=SPEC.controls)  # the same controls run by one `harness run`
    assert job.time_limit_s(SPEC) - job.time_limit_s(one) >= one.lock_wait_s + one.preflight_s


@pytest.mark.parametrize("runs, match", [
    (RUNS[:1], "one run per control"),
    ((RUNS[1], RUNS[0]), "not control 'ctl'"),
    ((RUNS[0], RUNS[0]), "not control 'ref'"),
    ((RUNS[0], ("ref-x;rm -rf /", 1)), "must match"),
    ((RUNS[0], (RUNS[1][0], 0)), "attempt"),
])
def test_a_groups_runs_are_checked_before_anything_is_submitted(runs, match) -> None:
    spec = JobSpec(night=SPEC.night, campaign_file="c.yaml", slot=3, attempt=2,
                   controls=SPEC.controls, runs=runs)
    site = Site(harness="/h", workdir="/w", runs_dir="/r", drop="/d")
    with pytest.raises(InvalidInput, match=match):
        job.sbatch_argv(spec, site)

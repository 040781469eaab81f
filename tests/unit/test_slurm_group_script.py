"""The job script of a `same_host` group, run by a real /bin/sh with a stand-in harness.

One job, each member's own `harness run --run-id R --attempt N`, in the group's order on
the node Slurm gave it; each member exported once sealed; Slurm's TERM reaches the member
running then and no later member starts; the job exits with the worst member's code.
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
  echo "run $args" >> "$tmp/log"
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
    assert [line.split()[0] for line in lines] == ["run", "bundle", "run", "bundle"]
    for i, (run_id, attempt) in enumerate(RUNS):
        words = lines[2 * i].split()
        assert words[words.index("--control") + 1] == ("ctl", "ref")[i]
        assert words[words.index("--run-id") + 1] == run_id
        assert words[words.index("--attempt") + 1] == str(attempt)
        assert lines[2 * i + 1] == f"bundle export {tmp_path}/runs/{run_id}"


def test_term_stops_the_running_member_and_no_later_member_starts(tmp_path) -> None:
    script = _script(tmp_path)
    (tmp_path / f"wait-{RUNS[0][0]}").touch()
    shell = subprocess.Popen(["/bin/sh", str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    log, deadline = tmp_path / "log", time.monotonic() + 10
    while not (log.exists() and "run " in log.read_text()):
        assert time.monotonic() < deadline, "the first member never started"
        time.sleep(0.02)
    time.sleep(0.2)  # the shell is in `wait` now
    os.kill(shell.pid, signal.SIGTERM)  # --signal=B:TERM signals the batch shell alone
    _, err = shell.communicate(timeout=30)
    assert shell.returncode == 7, err  # the harness's own code, after it sealed
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["run", "term", "bundle"]
    assert RUNS[1][0] not in log.read_text(), "a member started after the stop"


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

"""The job script of a night's run, run by a real /bin/sh with a stand-in harness.

The shell is no longer the harness (no `exec`): it must still pass Slurm's TERM on, wait
until the harness has sealed, export the sealed run into `<drop>/bundles/`, and exit with
the harness's own code. A stand-in records what it was asked and when it got TERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from harness.measure.slurm import script as jobscript
from harness.measure.slurm.job import ControlTime, JobSpec, Site

RUN_ID = "ctl-20261130T021501Z-0a1b2c3d"
SPEC = JobSpec(night="n-20261130T021500Z", campaign_file="c.yaml",
               controls=(ControlTime("ctl", 60, 5),), slot=0, attempt=1, run_id=RUN_ID)

STAND_IN = """#!/bin/sh
log={log}
if [ "$1" = run ]; then
  seal() {{ mkdir -p {runs}/{run_id}; : > {runs}/{run_id}/SHA256SUMS; }}
  trap 'echo term >> "$log"; sleep 0.5; seal; exit 7' TERM
  echo started >> "$log"
  [ "{mode}" != unsealed ] || exit {code}
  [ "{mode}" = wait ] || {{ seal; exit {code}; }}
  while :; do sleep 0.05; done
fi
echo "$@" >> "$log"
exit {export_code}
"""


def _script(tmp: Path, mode: str, code: int = 0, export_code: int = 0) -> tuple[Path, Path]:
    log, runs = tmp / "log", tmp / "runs"
    exe = tmp / "fake-harness"
    exe.write_text(STAND_IN.format(log=log, runs=runs, run_id=RUN_ID, mode=mode, code=code,
                                   export_code=export_code))
    exe.chmod(0o755)
    site = Site(harness=str(exe), workdir=str(tmp), runs_dir=str(runs), drop=str(tmp / "drop"))
    script = tmp / "job.sh"
    script.write_text(jobscript.job_script(SPEC, site))
    return script, log


def _wait_for(path: Path, text: str) -> None:
    deadline = time.monotonic() + 10
    while not (path.exists() and text in path.read_text()):
        assert time.monotonic() < deadline, f"{text!r} never in {path}"
        time.sleep(0.02)


def test_a_sealed_run_is_exported_to_the_drop_and_the_code_kept(tmp_path):
    script, log = _script(tmp_path, "done", code=1)
    done = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1, done.stderr  # the harness's code (refused), not export's
    lines = log.read_text().splitlines()
    assert lines[0] == "started"
    assert lines[1].split() == ["bundle", "export", f"{tmp_path}/runs/{RUN_ID}", "-o",
                                f"{tmp_path}/drop/bundles/{RUN_ID}.tar.gz"]
    assert (tmp_path / "drop" / "bundles").is_dir()


def test_term_to_the_shell_alone_reaches_the_harness_which_seals_before_export(tmp_path):
    script, log = _script(tmp_path, "wait")
    shell = subprocess.Popen(["/bin/sh", str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    _wait_for(log, "started")
    time.sleep(0.2)  # the shell is in `wait` now
    os.kill(shell.pid, signal.SIGTERM)  # --signal=B:TERM signals the batch shell alone
    _, err = shell.communicate(timeout=30)
    assert shell.returncode == 7, err  # the harness's own code, after it sealed
    lines = log.read_text().splitlines()
    assert lines[:2] == ["started", "term"] and lines[2].startswith("bundle export")


def test_no_seal_no_export_and_a_failed_export_changes_no_code(tmp_path):
    script, log = _script(tmp_path, "done", export_code=2)
    done = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert "not exported to the drop" in done.stderr
    other = tmp_path / "other"
    other.mkdir()
    script, log = _script(other, "unsealed", code=3)
    done = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 3 and log.read_text().splitlines() == ["started"]


def test_a_group_job_still_execs_the_harness():
    site = Site(harness="/h", workdir="/w", runs_dir="/r", drop="/d")
    group = JobSpec(night="n-1", campaign_file="c.yaml", slot=0, attempt=1,
                    controls=(ControlTime("a", 60, 5), ControlTime("b", 60, 5)))
    script = jobscript.job_script(group, site)
    assert script.splitlines()[-1].startswith("exec /h run") and "bundle" not in script

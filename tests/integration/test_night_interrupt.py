"""A night stopped by a signal says the truth: the exit code the process exits with, the
signal, and the real next step (start it again while a slot is left planned); starting it
again resumes it and names each slot it skips because its retries are spent."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.conftest import containers_with_label
from tests.integration.test_terminal import QUICK, STOPS, _default_hangup

pytestmark = pytest.mark.docker


def _night_stopped_by(project, cleanup_containers, sig: signal.Signals) -> tuple[str, int, Path]:
    project.control("slow", STOPS)
    project.control("quick", QUICK)
    camp = project.campaign("ni", ["slow", "quick"])
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    night = project.popen("night", str(camp), "--runs-dir", str(project.runs),
                          "--no-json-lines", preexec_fn=_default_hangup)
    deadline = time.monotonic() + 60
    while not containers_with_label(label, all_states=False):
        assert night.poll() is None, night.communicate()
        assert time.monotonic() < deadline, "the container never started"
        time.sleep(0.1)
    night.send_signal(sig)
    out, err = night.communicate(timeout=90)
    return out + err, night.returncode, camp


def test_ctrl_c_says_130_and_to_start_the_night_again(project, cleanup_containers):
    said, code, camp = _night_stopped_by(project, cleanup_containers, signal.SIGINT)
    assert code == 130, said[-3000:]
    assert "(interrupted by SIGINT, exit code 130)" in said
    assert "night ended (interrupted), exit code 130" in said
    assert "exit code 1:" not in said
    assert (f"next: start the night again to resume: harness night {camp} --runs-dir "
            f"{project.runs}") in said
    again = project.harness("night", str(camp), "--runs-dir", str(project.runs),
                            "--no-json-lines")
    said = again.stdout + again.stderr
    assert again.returncode == 1, said[-3000:]  # slow stays interrupted; quick accepted
    assert "(resumed)" in said and "accepted: " in said
    assert ("control slow skipped: attempt 1 (run slow-" in said
            and "retry.interrupted allows 0 retries" in said)
    assert "start the night again" not in said
    assert "next: harness rerun --failed" in said


def test_a_hang_up_names_the_signal_in_the_night_and_its_run(project, cleanup_containers):
    said, code, _ = _night_stopped_by(project, cleanup_containers, signal.SIGHUP)
    assert code == 1, said[-3000:]
    assert "(interrupted by SIGHUP, exit code 1)" in said
    [run_dir] = [p for p in project.run_dirs() if p.name != "nights"]
    assert f"interrupted: {run_dir} (by SIGHUP)" in said
    assert {"by": "harness", "rule": "RUN-INTERRUPTED",
            "detail": "the harness was stopped by SIGHUP during the run"} \
        in project.record(run_dir)["reasons"]

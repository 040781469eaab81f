"""A terminal can never cost a run, on the real engine and the rehearsal image.

A night (or a run) piped into `head -1`, or with stdout or stderr closed, runs and seals
every control as it would have; a SIGHUP (an ssh drop) stops the container and seals the run
`interrupted` like SIGTERM; Ctrl-C says what it does, a second one kills the container at
once, and either way the command exits 130; `harness status` flags a harness container
whose launcher is gone as "GPU in use without the lock"."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import datetime

import pytest

from harness.measure.lock import is_free
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.runfolder.manifest import verify_folder
from tests.conftest import containers_with_label

pytestmark = pytest.mark.docker

QUICK = 'command: [python3, -c, "print(1)"]\n'
# Stops at once on docker stop's SIGTERM (a bare python as PID 1 would ignore it).
STOPS = ('command: [python3, -c, "import signal, sys, time; signal.signal(signal.SIGTERM, '
         "lambda *a: sys.exit(143)); print('start', flush=True); time.sleep(60)\"]\n"
         "timeout: 2m\n")
# Ignores SIGTERM, with a stop grace no test could wait out: only a kill ends it soon.
STUBBORN = ('command: [python3, -c, "import time; print(\'start\', flush=True); '
            'time.sleep(120)"]\ntimeout: 5m\nstop_grace: 2m\n')


def _default_hangup() -> None:
    """The harness as a terminal starts it: SIGHUP not ignored, whatever ran pytest."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _journal_rows(project) -> list[tuple]:
    [night_dir] = sorted((project.runs / "nights").iterdir())
    with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
        return [(r.control, r.attempt, r.state, r.origin) for r in j.rows()]


@pytest.mark.parametrize(("command", "redirect"), [
    ("night", "| head -1"), ("night", "2>&1 | head -1"), ("night", ">&-"), ("night", "2>&-"),
    ("run", "| head -1"),  # `run` prints a line after each control: the 2nd meets EPIPE
])
def test_output_that_goes_nowhere_changes_nothing(project, command, redirect):
    controls = ["ta", "tb", "tc"]
    for name in controls:
        project.control(name, QUICK)
    camp = project.campaign("terminal", controls)
    line = (f'"{sys.executable}" -m harness {command} "{camp}" --runs-dir "{project.runs}" '
            f'{redirect}; exit "${{PIPESTATUS[0]}}"')
    done = subprocess.run(["bash", "-c", line], cwd=project.root, timeout=180,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
    if command == "night":  # the journal a night without the pipe writes
        assert _journal_rows(project) == [(c, 1, "accepted", "plan") for c in controls]
    sealed = [p for p in project.run_dirs() if p.name != "nights"]
    assert sorted(project.record(p)["control"]["name"] for p in sealed) == controls
    for run_dir in sealed:
        assert project.record(run_dir)["status"] == "accepted"
        assert verify_folder(run_dir) == [], run_dir


def _start_run(project, control: str, body: str, *extra: str) -> tuple[subprocess.Popen, str]:
    project.control(control, body)
    camp = project.campaign(control, [control])
    run = project.popen("run", str(camp), "--runs-dir", str(project.runs), *extra,
                        preexec_fn=_default_hangup)
    label = f"org.harness.lock={project.lock}"
    deadline = time.monotonic() + 60
    while not containers_with_label(label, all_states=False):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the container never started"
        time.sleep(0.1)
    return run, label


def _sealed_interrupted(project) -> dict:
    [run_dir] = project.run_dirs()
    rec = project.record(run_dir)
    assert rec["status"] == "interrupted" and "RUN-INTERRUPTED" in rec["rules"]
    verified = project.harness("verify", str(run_dir))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    return rec


def test_a_hang_up_stops_the_container_and_seals_the_run_interrupted(project,
                                                                    cleanup_containers):
    run, label = _start_run(project, "hup", STOPS)
    cleanup_containers.append(label)
    assert not is_free(project.lock), "the run holds the lock while its container runs"
    run.send_signal(signal.SIGHUP)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 1, err[-3000:]  # as for SIGTERM: the run's status, interrupted
    assert '"signal": "SIGHUP"' in err
    assert containers_with_label(label) == [], "the container was stopped and removed"
    assert is_free(project.lock)
    rec = _sealed_interrupted(project)
    [run_dir] = project.run_dirs()
    outcome = json.loads((run_dir / "outcome.json").read_text())
    assert outcome["interrupted"] and outcome["container_finished_at"]
    # the lock was given back only once the container had exited
    finished = re.sub(r"(\.\d{6})\d*", r"\1", outcome["container_finished_at"])  # docker: ns
    assert datetime.fromisoformat(rec["lock"]["released"]) >= datetime.fromisoformat(finished)


def test_ctrl_c_says_what_it_does_seals_and_exits_130(project, cleanup_containers):
    run, label = _start_run(project, "intr", STOPS, "--no-json-lines")
    cleanup_containers.append(label)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err[-3000:]
    assert "interrupted by SIGINT: stopping container" in err
    assert "press Ctrl-C again to kill it at once" in err
    assert containers_with_label(label) == []
    _sealed_interrupted(project)
    assert is_free(project.lock)


def test_a_second_ctrl_c_kills_the_container_at_once(project, cleanup_containers):
    run, label = _start_run(project, "intr2", STUBBORN)
    cleanup_containers.append(label)
    run.send_signal(signal.SIGINT)
    time.sleep(0.3)
    t0 = time.monotonic()
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=90)
    assert run.returncode == 130, err[-3000:]
    assert time.monotonic() - t0 < 30, "the second Ctrl-C did not wait out the 2 min grace"
    assert containers_with_label(label) == []
    _sealed_interrupted(project)
    [run_dir] = project.run_dirs()
    notes = json.loads((run_dir / "outcome.json").read_text())["notes"]
    assert any("killed at once" in n for n in notes), notes
    assert is_free(project.lock)


def test_status_flags_a_container_whose_launcher_is_gone(project, cleanup_containers):
    run, label = _start_run(project, "orphan", STOPS)
    cleanup_containers.append(label)
    run.kill()  # SIGKILL: nothing can stop the container, and the kernel frees the lock
    run.communicate()
    st = project.harness("status", "--runs-dir", str(project.runs), "--lock", str(project.lock))
    assert st.returncode == 3, st.stdout + st.stderr
    assert "GPU in use without the lock" in st.stdout
    assert "ENV-ORPHAN-CONTAINER" in st.stderr
    [cid] = containers_with_label(label, all_states=False)
    flagged = json.loads(project.harness("status", "--json", "--runs-dir", str(project.runs),
                                         "--lock", str(project.lock)).stdout)
    [mine] = [c for c in flagged["containers"] if c["id"].startswith(cid)]
    assert mine["orphaned"] and mine["on_lock"] and mine["launcher"]["pid"] == run.pid

"""The launcher witness is taken after the exec and judged against the recorded vector.

A launcher whose exec is slow (forked from this process, it waits before it execs sleep)
is the early read forced: read at once, the witness sees this process's own argv, which
the child inherited at fork; waited for, it sees the program's. The judge refuses the
first, accepts the second, refuses a witness whose argv is not the vector's, and accepts
a launcher script run by its interpreter.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from harness.base.catalogue import WITNESS_ARGV_DIFFERS, WITNESS_EXEC_UNCONFIRMED
from harness.judge import witnessed
from harness.measure.witness import launcher

SLEEP = os.path.realpath(shutil.which("sleep") or "/bin/sleep")
ARGV = [SLEEP, "30"]


@dataclass(frozen=True)
class Child:
    pid: int


@pytest.fixture
def slow_exec():
    """A child forked from this process that waits 0.5 s before it execs `sleep 30`: the
    window between fork and exec, widened."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            time.sleep(0.5)
            os.execv(SLEEP, ARGV)
        finally:
            os._exit(127)
    yield Child(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_read_too_early_the_witness_says_the_exec_was_not_seen(slow_exec):
    doc = launcher.collect(slow_exec.pid, SLEEP, limit=0.05)
    assert doc["exec"]["confirmed"] is False and doc["exec"]["waited_s"] >= 0.05
    assert doc["argv"] == psutil.Process().cmdline()  # this process's, inherited at fork
    [reason] = witnessed.judge(doc, ARGV)
    assert reason.rule == WITNESS_EXEC_UNCONFIRMED and SLEEP in reason.detail
    assert "did not run" in reason.detail


def test_waited_for_the_witness_sees_the_program_and_its_argv(slow_exec):
    doc = launcher.collect(slow_exec.pid, SLEEP)
    assert doc["exec"]["confirmed"] is True and doc["exec"]["waited_s"] >= 0.3
    assert doc["argv"] == ARGV and doc["exe"] == SLEEP and doc["exec"]["program"] == SLEEP
    assert witnessed.judge(doc, ARGV) == []


def test_a_witness_that_saw_another_argv_refuses(slow_exec):
    doc = launcher.collect(slow_exec.pid, SLEEP)
    [reason] = witnessed.judge(doc, [SLEEP, "31"])
    assert reason.rule == WITNESS_ARGV_DIFFERS
    assert reason.detail == "argv[1] is '30' in the witness, '31' in the vector (2 and 2 arguments)"
    [reason] = witnessed.judge(doc, [*ARGV, "--extra"])
    assert "argv[2] is None in the witness, '--extra' in the vector" in reason.detail


def test_a_launcher_gone_before_the_witness_refuses():
    proc = subprocess.Popen(["true"])
    proc.wait()
    doc = launcher.collect(proc.pid, SLEEP)
    [reason] = witnessed.judge(doc, ARGV)
    assert reason.rule == WITNESS_EXEC_UNCONFIRMED and "exited" in reason.detail


@pytest.mark.parametrize("doc", [None, {}, {"exec": None, "argv": ARGV},
                                 {"exec": {"confirmed": "yes"}, "argv": ARGV},
                                 {"error": "RuntimeError: no /proc", "argv": ARGV}])
def test_a_witness_that_does_not_say_it_saw_the_exec_refuses(doc):
    [reason] = witnessed.judge(doc, ARGV)
    assert reason.rule == WITNESS_EXEC_UNCONFIRMED


def test_a_confirmed_witness_with_no_argv_refuses():
    [reason] = witnessed.judge({"exec": {"confirmed": True}, "argv": None}, ARGV)
    assert reason.rule == WITNESS_ARGV_DIFFERS


def test_a_hostile_argv_is_shown_escaped_and_bounded():
    doc = {"exec": {"confirmed": True}, "argv": [SLEEP, "\x1b[2J" + "x" * 500]}
    [reason] = witnessed.judge(doc, ARGV)
    assert "\x1b" not in reason.detail and len(reason.detail) < 600


def test_a_launcher_script_run_by_its_interpreter_is_the_vectors(tmp_path: Path):
    script = tmp_path / "docker"
    script.write_text("#!/bin/sh\n/bin/sleep 30\n")  # sh stays: its argv is what is seen
    script.chmod(0o755)
    proc = subprocess.Popen(["docker", "run", "x"], env={"PATH": str(tmp_path)})
    try:
        doc = launcher.collect(proc.pid, str(script))
    finally:
        proc.kill()
        proc.wait()
    assert doc["exec"]["confirmed"] is True
    assert doc["argv"] == ["/bin/sh", str(script), "run", "x"]
    assert witnessed.judge(doc, ["docker", "run", "x"]) == []
    assert witnessed.judge({"exec": {"confirmed": True, "program": str(script)},
                            "argv": ["/bin/sh", str(script), "run", "x"]},
                           ["docker", "run", "x"]) == []
    [reason] = witnessed.judge({"exec": {"confirmed": True, "program": str(script)},
                                "argv": ["/bin/sh", "/elsewhere/docker", "run", "x"]},
                               ["docker", "run", "x"])
    assert reason.rule == WITNESS_ARGV_DIFFERS


def test_without_a_program_the_witness_is_taken_at_once(tmp_path: Path):
    doc = launcher.collect(os.getpid())
    assert doc["exec"] is None and doc["pid"] == os.getpid()

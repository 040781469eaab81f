"""A hostile shared lock folder against the real `harness run` and `harness status`
(issue 10 item 11, part of 15): a group member replaces the holder record with a FIFO, odd
JSON or a symlink while a run holds or waits for the lock; runs still finish, the GPU lock
is freed, status still prints; a lock path that cannot be created fails at once (exit 3)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from harness.measure.lock import GpuLock, holder_path, is_free
from harness.measure.nightfolder.holder import night_lock_path

SHORT = 'command: [python3, -c, "print(1)"]\n'
KINDS = ["fifo", "inf", "deep", "symlink", "markup"]


def plant(path: Path, kind: str, victim: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        return
    if os.path.lexists(path):
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "inf":
        path.write_text('{"pid": 1e999, "pid_create_time": 1e999, "user": 1e999}')
    elif kind == "deep":
        path.write_text('{"a":' * 20000 + "1" + "}" * 20000)
    elif kind == "symlink":
        path.symlink_to(victim)
    elif kind == "markup":
        path.write_text(json.dumps({"pid": 2**31 - 2, "user": "[bold red]x[/] [/nope]\x1b[2J",
                                    "host": "\n\u202e", "run_id": "\ud800"}))


def unblock(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def make_victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_text("secret\n")
    v.chmod(0o600)
    return v


def assert_untouched(v: Path) -> None:
    assert v.read_text() == "secret\n" and stat.S_IMODE(v.stat().st_mode) == 0o600


def finish(p: subprocess.Popen, limit: float, path: Path) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        unblock(path)
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"the run hung on a hostile holder record:\n{err[-2000:]}")
    return p.returncode, out, err


def status_lines(project) -> list[str]:
    st = project.harness("status", "--runs-dir", str(project.runs), "--lock", str(project.lock),
                         timeout=30)
    assert st.returncode == 0 and "Traceback" not in st.stderr, st.stderr
    assert "internal error" not in st.stderr + st.stdout
    js = project.harness("status", "--json", "--runs-dir", str(project.runs),
                         "--lock", str(project.lock), timeout=30)
    assert js.returncode == 0, js.stderr
    json.loads(js.stdout)
    lines = st.stdout.splitlines()
    assert lines[0].startswith(f"GPU lock {project.lock}")
    for line in lines:
        assert "\x1b" not in line and "\u202e" not in line and len(line) < 2000
    return lines


@pytest.mark.parametrize("kind", KINDS)
def test_run_finishes_when_its_holder_record_turns_hostile(project, tmp_path, kind):
    victim = make_victim(tmp_path)
    project.control("short", SHORT)
    camp = project.campaign("camp", ["short"])
    marker = tmp_path / "held"
    env = {**os.environ, "HARNESS_FAULTPOINT": "lock-held:6",
           "HARNESS_FAULTPOINT_MARKER": str(marker)}
    p = project.popen("run", str(camp), "--runs-dir", str(project.runs), env=env)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), p.communicate()[1][-2000:]
    plant(holder_path(project.lock), kind, victim)
    plant(holder_path(night_lock_path(project.lock)), kind, victim)
    lines = status_lines(project)
    assert "held by" in lines[0]
    if kind in ("fifo", "deep", "symlink"):
        assert "held by an unknown process (holder record unusable" in lines[0], lines[0]
    code, _, err = finish(p, 90, holder_path(project.lock))
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert is_free(project.lock)
    assert_untouched(victim)


@pytest.mark.parametrize("kind", ["fifo", "inf", "deep", "markup"])
def test_waiting_run_survives_a_hostile_holder_record(project, tmp_path, kind):
    victim = make_victim(tmp_path)
    project.control("short", SHORT)
    camp = project.campaign("camp", ["short"])
    other = GpuLock(project.lock, run_id="someone-else", timeout=5)
    other.acquire()
    try:
        plant(holder_path(project.lock), kind, victim)
        p = project.popen("run", str(camp), "--runs-dir", str(project.runs))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not project.runs.is_dir():
            time.sleep(0.1)  # made at the start: the run waits for the lock before its folder
        time.sleep(2.5)  # a few on_wait rounds read the hostile record
        assert p.poll() is None, p.communicate()[1][-2000:]
        status_lines(project)
    finally:
        other.release()
    code, _, err = finish(p, 90, holder_path(project.lock))
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert '"event": "lock-wait"' in err
    assert is_free(project.lock)


@pytest.mark.parametrize("where", ["proc", "under-a-file"])
def test_lock_path_that_cannot_be_created_exits_3_at_once(project, tmp_path, where):
    (tmp_path / "plain").write_text("")
    lock = {"proc": "/proc/gpu.lock", "under-a-file": str(tmp_path / "plain" / "gpu.lock")}[where]
    project.control("short", SHORT)
    camp = project.root / "campaigns" / "bad.yaml"
    camp.write_text(f"name: bad\nrow: TEST\nlock: {lock}\nlock_timeout: 120\n"
                    "controls: [short]\n")
    t0 = time.monotonic()
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs), timeout=60)
    took = time.monotonic() - t0
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert "ENV-LOCK-PATH" in r.stderr + r.stdout or "cannot" in r.stderr, r.stderr
    assert took < 30, f"took {took:.1f}s: it waited for the lock timeout"


def test_lock_file_planted_as_a_symlink_is_refused_and_the_victim_untouched(project, tmp_path):
    victim = make_victim(tmp_path)
    project.lock.symlink_to(victim)
    project.control("short", SHORT)
    camp = project.campaign("camp", ["short"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs), timeout=60)
    assert r.returncode == 3 and "symlink" in r.stderr, r.stderr
    assert_untouched(victim)
    lines = status_lines(project)
    assert "unusable" in lines[0]

"""A hostile shared lock folder (issue 10 item 11, part of 15): a group member may plant a
symlink, FIFO, folder or odd JSON at any name beside the lock. Holders never write through
or chmod a planted name, never block on it, never crash on it; a lock path that cannot be
used fails at once with exit 3."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path

import pytest
from rich.console import Console

from harness.base import atomic
from harness.base.errors import EnvironmentFault
from harness.driver.night.nightlock import NightLock
from harness.measure.lock import (
    GpuLock,
    HeldFile,
    describe_holder,
    holder_path,
    is_free,
    read_holder,
)
from harness.measure.nightfolder.holder import describe, night_lock_path, read_night_holder
from harness.measure.ui import TerminalReporter
from harness.readers.statuslines import lock_state, render

NO_PID = 2**31 - 2  # a valid pid number that no process has
# A lock timeout no test waits out: "refused at once" is then a tenth of it, far from any
# host's load, and a lock that waited would be stopped by pytest's timeout long before.
AGES = 300
MARKUP = "[bold red]boom[/] [/nope]"
ODD_RECORDS = {
    "empty": b"",
    "not-utf8": b'{"user": "\xff\xfe"}',
    "inf-top": b"1e999",
    "inf-pid": b'{"pid": 1e999, "pid_create_time": 1e999, "user": "u"}',
    "nan": b'{"pid": NaN, "pid_create_time": Infinity}',
    "huge-int-pid": b'{"pid": 99999999999999999999999999}',
    "too-many-digits": b'{"pid": ' + b"9" * 5000 + b"}",
    "deep-list": b"[" * 30000 + b"]" * 30000,
    "deep-object": b'{"a":' * 20000 + b"1" + b"}" * 20000,
    "list": b"[1, 2]",
    "string": b'"hello"',
    "bool-pid": b'{"pid": true, "pid_create_time": false}',
    "wrong-types": b'{"pid": "1", "user": {"a": 1}, "host": [1], "since": 3, "run_id": null}',
    "controls": json.dumps({"pid": NO_PID, "user": "\x1b[2J\x1b[31mred\nnext\r\u202e\u2028",
                            "host": "\ud800", "run_id": MARKUP}).encode(),
    "long": json.dumps({"pid": NO_PID, "user": "u" * 60000}).encode(),
    "forged-alive": json.dumps({"alive": True, "unreadable": 5, "pid": 2**31 + 5}).encode(),
}


def assert_one_safe_line(text: str, limit: int = 2000) -> None:
    assert isinstance(text, str) and len(text) <= limit, len(text)
    bad = [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]
    assert bad == [], bad


def finishes(fn, limit: float = 5.0) -> None:
    """Run `fn` in a thread; fail (without hanging the suite) if it does not end in time."""
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"{fn} still blocked after {limit}s"
    assert errors == [], errors


def unblock_fifo(path: Path) -> None:
    """Open a FIFO for writing so a reader stuck in open() (old code) gets free."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.fixture
def lock(tmp_path) -> Path:
    (tmp_path / "locks").mkdir()
    return tmp_path / "locks" / "gpu.lock"


# -- reading holder records of every odd shape -------------------------------------------

@pytest.mark.parametrize("name", sorted(ODD_RECORDS))
def test_odd_holder_records_are_read_without_raising(lock, name):
    holder_path(lock).write_bytes(ODD_RECORDS[name])
    rec = read_holder(lock)
    assert rec is not None and rec["alive"] is False
    assert_one_safe_line(describe_holder(rec))
    json.dumps(rec, allow_nan=False)  # status --json can always print it
    assert "[bold red]" not in describe_holder(rec) or name == "controls"


def test_a_record_cannot_forge_liveness_or_types(lock):
    holder_path(lock).write_bytes(ODD_RECORDS["forged-alive"])
    rec = read_holder(lock)
    assert rec["alive"] is False and "pid" not in rec
    holder_path(lock).write_bytes(ODD_RECORDS["wrong-types"])
    assert read_holder(lock) == {"alive": False}


def test_hostile_field_values_are_one_bounded_line(lock):
    holder_path(lock).write_bytes(ODD_RECORDS["controls"])
    text = describe_holder(read_holder(lock))
    assert_one_safe_line(text)
    assert "\x1b" not in text and "\n" not in text and MARKUP in text  # kept, as plain text
    holder_path(lock).write_text(json.dumps({"pid": NO_PID, "user": "u" * 60000}))
    assert len(describe_holder(read_holder(lock))) < 400


@pytest.mark.parametrize("kind", ["fifo", "symlink-dev-zero", "folder", "huge"])
def test_non_regular_or_huge_holder_records_are_unreadable_not_blocking(lock, kind):
    path = holder_path(lock)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        with open(path, "wb") as f:
            f.truncate(1 << 30)  # sparse: 1 GiB
    got: list = []
    try:
        finishes(lambda: got.append(read_holder(lock)))
    finally:
        unblock_fifo(path)
    assert got[0]["alive"] is False and "unreadable" in got[0]
    assert_one_safe_line(describe_holder(got[0]))


def test_missing_record_is_none(lock):
    assert read_holder(lock) is None


# -- atomic writes: the temp file is never a planted name --------------------------------

def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_text("secret\n")
    v.chmod(0o600)
    return v


def assert_untouched(v: Path) -> None:
    assert v.read_text() == "secret\n"
    assert stat.S_IMODE(v.stat().st_mode) == 0o600


def test_temp_name_is_unpredictable_and_planted_names_are_never_followed(tmp_path, monkeypatch):
    v = victim(tmp_path)
    target = tmp_path / "locks" / "gpu.lock.holder.json"
    target.parent.mkdir()
    # What the old code used (pid-derived), and a name the attacker "guessed" right.
    (target.parent / f".{target.name}.tmp-{os.getpid()}").symlink_to(v)
    guesses = iter(["a" * 32, "b" * 32])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n=None: next(guesses))
    (target.parent / f".{target.name}.tmp-{'a' * 32}").symlink_to(v)
    atomic.write_json(target, {"pid": 1}, mode=0o664)
    assert json.loads(target.read_text()) == {"pid": 1}
    assert stat.S_IMODE(target.stat().st_mode) == 0o664
    assert_untouched(v)


def test_fifo_at_the_guessed_temp_name_does_not_block(tmp_path, monkeypatch):
    target = tmp_path / "rec.json"
    guesses = iter(["c" * 32, "d" * 32])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n=None: next(guesses))
    os.mkfifo(tmp_path / f".rec.json.tmp-{'c' * 32}")
    finishes(lambda: atomic.write_text(target, "x"))
    assert target.read_text() == "x"


def test_temp_names_differ_between_writes(tmp_path):
    assert atomic.temp_name(tmp_path / "a") != atomic.temp_name(tmp_path / "a")
    assert len(atomic.temp_name(tmp_path / ("n" * 255)).name) <= 255


def test_symlink_at_the_target_is_replaced_not_followed(tmp_path):
    v = victim(tmp_path)
    target = tmp_path / "rec.json"
    target.symlink_to(v)
    atomic.write_text(target, "mine")
    assert not target.is_symlink() and target.read_text() == "mine"
    assert_untouched(v)
    other = tmp_path / "evidence.json"
    other.symlink_to(v)
    with pytest.raises(FileExistsError):
        atomic.write_text(other, "mine", exclusive=True)
    assert_untouched(v)


# -- the lock file itself ----------------------------------------------------------------

@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_lock_file_planted_as_a_link_to_a_victim_leaves_it_untouched(tmp_path, lock, how):
    v = victim(tmp_path)
    if how == "symlink":
        lock.symlink_to(v)
        with pytest.raises(EnvironmentFault) as e:
            GpuLock(lock, run_id="r", timeout=5).acquire()
        assert e.value.rule == "ENV-LOCK-PATH" and "symlink" in e.value.message
    else:
        os.link(v, lock)
        g = GpuLock(lock, run_id="r", timeout=5)
        g.acquire()
        g.release()
    assert_untouched(v)


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_lock_file_that_is_not_a_regular_file_is_refused_at_once(lock, kind):
    os.mkfifo(lock) if kind == "fifo" else lock.mkdir()
    t0 = time.monotonic()
    with pytest.raises(EnvironmentFault) as e:
        GpuLock(lock, run_id="r", timeout=AGES).acquire()
    assert e.value.rule == "ENV-LOCK-PATH" and time.monotonic() - t0 < AGES / 10
    assert e.value.code == 3 and kind.replace("folder", "dir") in e.value.message


@pytest.mark.parametrize("where", ["under-a-file", "proc", "under-a-file-deep"])
def test_lock_path_that_cannot_be_created_fails_at_once(tmp_path, where):
    (tmp_path / "f").write_text("")
    path = {"under-a-file": tmp_path / "f" / "gpu.lock", "proc": Path("/proc/gpu.lock"),
            "under-a-file-deep": tmp_path / "f" / "x" / "gpu.lock"}[where]
    t0 = time.monotonic()
    with pytest.raises(EnvironmentFault) as e:
        GpuLock(path, run_id="r", timeout=AGES).acquire()
    assert time.monotonic() - t0 < AGES / 10, "must not wait for the lock timeout"
    assert e.value.rule == "ENV-LOCK-PATH" and e.value.code == 3 and str(path.parent) in \
        e.value.message


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to nobody")
def test_lock_folder_not_writable_for_the_user_fails_at_once(tmp_path):
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    code = ("import sys, time; from harness.measure.lock import GpuLock; "
            "from harness.base.errors import EnvironmentFault\nt = time.monotonic()\n"
            "try:\n GpuLock(sys.argv[1], run_id='r', "
            f"timeout={AGES}).acquire()\nexcept EnvironmentFault as e:\n print(e.rule, "
            "round(time.monotonic() - t, 2)); print(e.message)")
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
            "-c", code, str(folder / "gpu.lock")]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=AGES / 2,
                       cwd=Path(__file__).resolve().parents[2])
    rule, took = r.stdout.split("\n")[0].split()
    assert rule == "ENV-LOCK-PATH" and float(took) < AGES / 10, r.stdout + r.stderr
    assert "Permission denied" in r.stdout


def test_is_free_does_not_create_and_reports_odd_files(lock):
    assert is_free(lock) and not os.path.lexists(lock)
    lock.symlink_to("/dev/null")
    with pytest.raises(OSError):
        is_free(lock)


def test_a_held_lock_is_not_free_and_released_is(lock):
    g = GpuLock(lock, run_id="r", timeout=5)
    g.acquire()
    assert not is_free(lock) and not HeldFile(lock, "x").try_acquire(0.1)
    rec = read_holder(lock)
    assert rec["alive"] is True and rec["pid"] == os.getpid() and rec["run_id"] == "r"
    rec.pop("pid_create_time")
    assert "not running" not in describe_holder(read_holder(lock))
    g.release()
    assert is_free(lock) and not holder_path(lock).exists()


# -- release with a hostile record planted during the hold -------------------------------

def plant(path: Path, kind: str, target: Path | None = None) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
        (path / "x").write_text("")
    elif kind == "symlink":
        path.symlink_to(target)
    elif kind == "inf":
        path.write_text('{"pid": 1e999, "pid_create_time": 1e999}')
    elif kind == "deep":
        path.write_text("[" * 30000 + "]" * 30000)


@pytest.mark.parametrize("kind", ["fifo", "folder", "symlink", "inf", "deep"])
def test_release_never_blocks_on_a_hostile_record_and_frees_the_gpu(tmp_path, lock, kind):
    v = victim(tmp_path)
    g = GpuLock(lock, run_id="r", timeout=5)
    g.acquire()
    plant(holder_path(lock), kind, v)
    try:
        finishes(g.release)
    finally:
        unblock_fifo(holder_path(lock))
    assert is_free(lock)
    assert_untouched(v)
    assert os.path.lexists(holder_path(lock)), "not ours: left for its owner"


@pytest.mark.parametrize("kind", ["fifo", "folder", "symlink"])
def test_acquire_with_a_hostile_record_already_there(tmp_path, lock, kind):
    v = victim(tmp_path)
    plant(holder_path(lock), kind, v)
    g = GpuLock(lock, run_id="r", timeout=5)
    try:
        finishes(lambda: (g.acquire(), g.release()))
    finally:
        unblock_fifo(holder_path(lock))
    assert is_free(lock)
    assert_untouched(v)


def test_release_removes_our_own_record_only(lock):
    g = GpuLock(lock, run_id="r", timeout=5)
    g.acquire()
    rec = json.loads(holder_path(lock).read_text())
    rec["pid_create_time"] += 100  # same pid, another process life: not ours
    holder_path(lock).write_text(json.dumps(rec))
    assert read_holder(lock)["alive"] is False
    g.release()
    assert holder_path(lock).exists() and is_free(lock)


# -- the night lock goes through the same mechanism --------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "symlink", "inf", "deep"])
def test_night_lock_with_hostile_record(tmp_path, lock, kind):
    v = victim(tmp_path)
    n = NightLock(lock, kind="night", campaign="c")
    finishes(lambda: n.acquire(timeout=5))
    plant(holder_path(night_lock_path(lock)), kind, v)
    holder = read_night_holder(lock)
    assert holder is not None and holder["alive"] is False
    assert_one_safe_line(describe(holder))
    other = NightLock(lock, kind="night", campaign="c2")
    with pytest.raises(EnvironmentFault) as e:
        other.acquire(timeout=1)
    assert e.value.rule == "ENV-NIGHT-BUSY"
    try:
        finishes(n.release)
    finally:
        unblock_fifo(holder_path(night_lock_path(lock)))
    assert is_free(night_lock_path(lock))
    assert_untouched(v)


def test_night_lock_path_planted_as_symlink_is_refused(tmp_path, lock):
    v = victim(tmp_path)
    night_lock_path(lock).symlink_to(v)
    with pytest.raises(EnvironmentFault) as e:
        NightLock(lock, kind="rerun", campaign="c").acquire(timeout=5)
    assert e.value.rule == "ENV-LOCK-PATH"
    assert_untouched(v)


# -- what a person sees: status and the waiting line -------------------------------------

@pytest.mark.parametrize("name", ["controls", "inf-pid", "deep-list", "not-utf8"])
def test_status_renders_hostile_records(lock, name):
    g = GpuLock(lock, run_id="r", timeout=5)
    g.acquire()
    try:
        holder_path(lock).write_bytes(ODD_RECORDS[name])
        holder_path(night_lock_path(lock)).write_bytes(ODD_RECORDS[name])
        state = {"lock": lock_state(lock), "containers": [], "engine_error": None,
                 "night": None}
        for line in render(state):
            assert_one_safe_line(line)
        json.dumps(state, allow_nan=False)
        assert state["lock"]["held"]
    finally:
        g.release()


def test_status_reports_an_unusable_lock_file(lock):
    os.mkfifo(lock)
    state = {"lock": lock_state(lock), "containers": [], "engine_error": None, "night": None}
    assert "unusable" in render(state)[0] and "fifo" in render(state)[0]


def test_waiting_line_shows_markup_as_text(monkeypatch):
    """On a terminal the spinner's text, off one the plain line: the holder record is
    written by whoever holds the lock, and neither form may read it as rich markup."""
    ui = TerminalReporter()
    ui.console = Console(file=io.StringIO(), force_terminal=True, width=300)
    shown: list[str] = []

    class FakeStatus:
        def start(self) -> None:
            pass

        def update(self, text: str) -> None:
            shown.append(text)

        def stop(self) -> None:
            pass

    monkeypatch.setattr(ui.console, "status", lambda text: (shown.append(text), FakeStatus())[1])
    ui.waiting({"pid": 1, "user": MARKUP, "alive": True}, 3.0)
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(shown[0])
    assert MARKUP in out.getvalue()

    plain = TerminalReporter()
    plain.console = Console(file=io.StringIO(), width=300, color_system=None)
    plain.waiting({"pid": 1, "user": MARKUP, "alive": True}, 3.0)
    line = plain.console.file.getvalue()
    assert MARKUP in line and "waiting" in line

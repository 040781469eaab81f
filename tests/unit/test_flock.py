"""The one lock primitive and every lock taken through it: a held lock is waited for and
then refused with ENV-LOCK-TIMEOUT, a planted name is refused with ENV-LOCK-PATH (never
followed, never blocking), and the bounded descriptor reader stops one byte past its limit.

A flock taken on a second descriptor of the same file conflicts with the first even in one
process, so each "other holder" here is a descriptor of this test's own."""

from __future__ import annotations

import fcntl
import os
import stat
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.base import flock
from harness.base.catalogue import ENV_LOCK_PATH, ENV_LOCK_TIMEOUT
from harness.base.errors import ENVIRONMENT, EnvironmentFault, InvalidInput
from harness.base.readfile import TooLarge, read_fd
from harness.judge.finalize.addendum import addendum_lock, write_addendum
from harness.measure import images, modelcache, perflog

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def held_by_another(path: Path) -> int:
    """A descriptor holding the flock on `path` (a file or a folder) as another holder."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if path.is_dir() else 0))
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def release_later(fd: int, after_s: float) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(after_s), os.close(fd)), daemon=True)
    t.start()
    return t


# -- the primitive ---------------------------------------------------------------------------

def test_a_lock_held_past_its_timeout_is_an_environment_fault(tmp_path):
    lock = tmp_path / "x.lock"
    lock.touch()
    other = held_by_another(lock)
    try:
        t0 = time.monotonic()
        with pytest.raises(EnvironmentFault) as e, flock.exclusive(lock, "test lock",
                                                                   timeout=0.3):
            pass
        assert 0.3 <= time.monotonic() - t0 < 30  # it waited, then gave up
        assert e.value.rule == ENV_LOCK_TIMEOUT and e.value.code == ENVIRONMENT
        assert e.value.message == f"timed out after 0.3s waiting for the test lock {lock}"
    finally:
        os.close(other)
    with flock.exclusive(lock, "test lock", timeout=0):  # free again: taken at once
        assert not flock.is_free(lock)
    assert flock.is_free(lock)


def test_a_waiting_lock_is_taken_once_its_holder_lets_go(tmp_path):
    lock = tmp_path / "x.lock"
    lock.touch()
    release_later(held_by_another(lock), 0.3)
    t0 = time.monotonic()
    with flock.exclusive(lock, "test lock", timeout=10):
        assert time.monotonic() - t0 >= 0.25


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_planted_name_is_refused_at_once_and_never_followed(tmp_path, kind):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    lock = tmp_path / "x.lock"
    {"symlink": lambda: lock.symlink_to(victim), "fifo": lambda: os.mkfifo(lock),
     "folder": lock.mkdir}[kind]()
    t0 = time.monotonic()
    with pytest.raises(EnvironmentFault) as e, flock.exclusive(lock, "test lock", timeout=300):
        pass
    assert time.monotonic() - t0 < 30  # no wait for the timeout, no blocking open
    assert e.value.rule == ENV_LOCK_PATH and e.value.code == ENVIRONMENT
    assert e.value.message.startswith(f"cannot use the test lock {lock}: it is a")
    assert victim.read_text() == "keep" and stat.S_IMODE(victim.stat().st_mode) != 0o664


def test_a_lock_file_where_nothing_can_be_created_is_refused_at_once(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(EnvironmentFault) as e, flock.exclusive(blocker / "x.lock", "test lock",
                                                               timeout=30):
        pass
    assert e.value.rule == ENV_LOCK_PATH


def test_a_shared_lock_is_created_for_the_group_and_a_private_one_as_the_umask_says(tmp_path):
    old = os.umask(0o077)
    try:
        shared = flock.open_file(tmp_path / "shared.lock")
        private = flock.open_file(tmp_path / "private.lock", shared=False)
    finally:
        os.umask(old)
    os.close(shared)
    os.close(private)
    assert stat.S_IMODE((tmp_path / "shared.lock").stat().st_mode) == 0o664
    assert stat.S_IMODE((tmp_path / "private.lock").stat().st_mode) == 0o600
    (tmp_path / "shared.lock").chmod(0o600)  # an existing file's mode is never changed
    os.close(flock.open_file(tmp_path / "shared.lock"))
    assert stat.S_IMODE((tmp_path / "shared.lock").stat().st_mode) == 0o600
    assert flock.open_file(tmp_path / "absent.lock", create=False) is None


def test_a_folder_lock_waits_or_times_out_and_never_follows_a_symlink(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    other = held_by_another(folder)
    with pytest.raises(EnvironmentFault) as e, flock.holding(
            flock.open_folder(folder), timeout=0.2, busy="busy folder"):
        pass
    assert e.value.rule == ENV_LOCK_TIMEOUT and e.value.message == "busy folder"
    release_later(other, 0.3)
    with flock.holding(flock.open_folder(folder), timeout=None):  # waits as long as it takes
        pass
    (tmp_path / "link").symlink_to(folder)
    with pytest.raises(OSError):
        flock.open_folder(tmp_path / "link")
    os.close(flock.open_folder(tmp_path / "link", follow_symlinks=True))


# -- every user of it -----------------------------------------------------------------------

def test_a_refinalize_waits_for_the_one_holding_the_run_then_refuses_with_exit_3(tmp_path):
    run = tmp_path / "r1"
    run.mkdir()
    other = held_by_another(run)
    try:
        with pytest.raises(EnvironmentFault) as e, addendum_lock(run, timeout=0.2):
            pass
        assert e.value.rule == ENV_LOCK_TIMEOUT and e.value.code == ENVIRONMENT
        assert e.value.message == f"{run}: another refinalize has held the run for over 0.2s"
    finally:
        os.close(other)
    assert write_addendum(run, "x", {"f": b"1"}, NOW).name == "20260101T000000Z-x"
    (tmp_path / "link").symlink_to(run)
    with pytest.raises(InvalidInput, match="is not a run folder"), addendum_lock(
            tmp_path / "link"):
        pass


def test_image_pins_of_one_folder_take_turns(tmp_path):
    other = held_by_another(tmp_path)
    entered = []

    def pin() -> None:
        with images._locked_folder(tmp_path):
            entered.append(True)

    t = threading.Thread(target=pin, daemon=True)
    t.start()
    time.sleep(0.3)
    assert entered == []  # waiting for the pin before it
    os.close(other)
    t.join(5)
    assert entered == [True]


def test_the_model_cache_is_skipped_while_its_lock_is_held_or_planted(tmp_path, monkeypatch):
    monkeypatch.setattr(modelcache, "LOCK_TIMEOUT_S", 0.2)
    cache = tmp_path / "hashes.json"
    update = {str(tmp_path): {"stat": [1, 2, 3, 4, 5], "sha256": "a" * 64}}
    lock = tmp_path / "hashes.json.lock"
    lock.touch()
    other = held_by_another(lock)
    try:
        assert modelcache.save(cache, update) is False and not cache.exists()
    finally:
        os.close(other)
    assert modelcache.save(cache, update) is True and modelcache.load(cache) == update
    lock.unlink()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    lock.symlink_to(victim)
    assert modelcache.save(cache, update) is False and victim.read_text() == "keep"


def test_the_perf_log_is_not_appended_while_its_lock_is_held(tmp_path, monkeypatch):
    monkeypatch.setattr(perflog, "LOCK_TIMEOUT_S", 0.2)
    (tmp_path / "perflog").mkdir()
    lock = tmp_path / "perflog" / "camp.csv"  # the log itself is its lock
    lock.touch()
    other = held_by_another(lock)
    line = {"campaign": "camp", "metric": "duration_s", "value": 1.0}
    try:
        with pytest.raises(EnvironmentFault) as e:
            perflog.append(tmp_path, "camp", [line])
        assert e.value.rule == ENV_LOCK_TIMEOUT
        assert lock.read_text() == "" and not (tmp_path / "perflog" / "camp.jsonl").exists()
    finally:
        os.close(other)
    perflog.append(tmp_path, "camp", [line])
    assert (tmp_path / "perflog" / "camp.csv").read_text().count("\n") == 2


# -- the one bounded reader of a descriptor ----------------------------------------------------

def test_read_fd_reads_to_the_limit_and_refuses_one_byte_more(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert read_fd(fd, 10) == b"x" * 10
        os.lseek(fd, 0, os.SEEK_SET)
        with pytest.raises(TooLarge) as e:
            read_fd(fd, 9)
        assert (e.value.limit, e.value.size) == (9, 10)
    finally:
        os.close(fd)


def test_read_fd_stops_one_byte_past_the_limit_of_a_stream_that_said_nothing():
    r, w = os.pipe()  # fstat says 0 bytes, as a file that grows after it was looked at
    try:
        os.write(w, b"y" * 100)
        os.close(w)
        with pytest.raises(TooLarge) as e:
            read_fd(r, 20)
        assert e.value.size is None
        assert len(os.read(r, 1000)) == 100 - 21  # it read exactly one byte past the limit
    finally:
        os.close(r)

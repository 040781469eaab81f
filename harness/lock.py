"""The host's GPU lock: a kernel flock (via filelock) plus a holder record beside it.

The kernel releases a flock when its holder dies, however it dies, so a crashed harness
never leaves the GPU locked. The holder record (`gpu.lock.holder.json`) only informs
waiters and `harness status` who holds it; it is never trusted for mutual exclusion.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import filelock
import psutil

from harness.atomic import write_json
from harness.errors import EnvironmentFault
from harness.timeutil import utc_now

POLL_S = 0.5


def holder_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".holder.json")


def read_holder(lock_path: Path) -> dict | None:
    """The holder record, with `alive` saying whether its pid still runs as recorded."""
    try:
        rec = json.loads(holder_path(lock_path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict):
        return None
    rec["alive"] = _alive(rec)
    return rec


def _alive(rec: dict) -> bool:
    try:
        proc = psutil.Process(int(rec.get("pid", -1)))
        created = rec.get("pid_create_time")
        return created is None or abs(proc.create_time() - float(created)) < 0.01
    except (psutil.Error, ValueError, TypeError):
        return False


def is_free(lock_path: Path) -> bool:
    """Probe without waiting: True when nobody holds the flock (taken and dropped at once)."""
    probe = filelock.FileLock(str(lock_path), timeout=0, preserve_lock_file=True,
                              fallback_to_soft=False, thread_local=False)
    try:
        probe.acquire(timeout=0)
    except filelock.Timeout:
        return False
    probe.release()
    return True


@dataclass
class Held:
    """What a run records of its hold: when it asked, got and gave back the lock."""

    path: Path
    requested: str
    acquired: str
    wait_s: float
    released: str | None = None
    hold_s: float | None = None

    def as_dict(self) -> dict:
        return {"path": str(self.path), "requested": self.requested, "acquired": self.acquired,
                "released": self.released, "wait_s": round(self.wait_s, 3),
                "hold_s": None if self.hold_s is None else round(self.hold_s, 3)}


class HeldFile:
    """A kernel flock on `path` plus the holder record beside it: the mechanism both the
    GPU lock and the night lock use."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._lock = filelock.FileLock(str(self.path), mode=0o664, preserve_lock_file=True,
                                       fallback_to_soft=False, thread_local=False)
        self.record: dict = {}

    def prepare(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise EnvironmentFault(f"cannot create the lock folder {self.path.parent}: {e}",
                                   rule="ENV-LOCK-PATH") from None

    def try_acquire(self, timeout: float) -> bool:
        """Take the flock within `timeout` seconds; False if someone else holds it."""
        try:
            self._lock.acquire(timeout=timeout)
            return True
        except filelock.Timeout:
            return False
        except OSError as e:
            raise EnvironmentFault(f"cannot open the {self.what} {self.path}: {e}",
                                   rule="ENV-LOCK-PATH") from None

    @property
    def locked(self) -> bool:
        return self._lock.is_locked

    def announce(self, **fields: object) -> None:
        """Write the holder record: who we are, plus `fields`. Group members replace it."""
        me = psutil.Process()
        self.record = {"pid": os.getpid(), "pid_create_time": me.create_time(),
                       "host": socket.gethostname(), "user": getpass.getuser(), **fields}
        write_json(holder_path(self.path), self.record, mode=0o664)

    def update(self, **fields: object) -> None:
        self.record.update(fields)
        write_json(holder_path(self.path), self.record, mode=0o664)

    def release(self) -> None:
        """Remove our holder record, then drop the flock."""
        if not self._lock.is_locked:
            return
        try:
            rec = read_holder(self.path)
            if rec and rec.get("pid") == os.getpid():
                holder_path(self.path).unlink(missing_ok=True)
        finally:
            self._lock.release(force=True)


class GpuLock:
    """Take the lock, or wait for it showing who holds it, or time out with exit 3."""

    def __init__(self, path: Path, *, run_id: str, timeout: float,
                 on_wait: Callable[[dict | None, float], None] | None = None) -> None:
        self.path = Path(path)
        self.run_id = run_id
        self.timeout = timeout
        self.on_wait = on_wait
        self._file = HeldFile(self.path, "GPU lock")
        self._t_acquired = 0.0
        self.held: Held | None = None

    def acquire(self) -> Held:
        self._file.prepare()
        requested, t0 = utc_now(), time.monotonic()
        while not self._file.try_acquire(POLL_S):
            waited = time.monotonic() - t0
            if self.on_wait:
                self.on_wait(read_holder(self.path), waited)
            if waited >= self.timeout:
                raise EnvironmentFault(
                    f"timed out after {waited:.0f}s waiting for the GPU lock {self.path} "
                    f"(held by {describe_holder(read_holder(self.path))})",
                    rule="ENV-LOCK-TIMEOUT")
        self._t_acquired = time.monotonic()
        self.held = Held(self.path, requested, utc_now(), self._t_acquired - t0)
        self._file.announce(run_id=self.run_id, since=self.held.acquired)
        return self.held

    def release(self) -> Held | None:
        if self.held is None or not self._file.locked:
            return self.held
        self._file.release()
        self.held.released = utc_now()
        self.held.hold_s = time.monotonic() - self._t_acquired
        return self.held

    def __enter__(self) -> Held:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def describe_holder(holder: dict | None) -> str:
    if not holder:
        return "an unknown process (no holder record)"
    state = "" if holder.get("alive") else ", not running any more"
    return (f"pid {holder.get('pid')} ({holder.get('user')}@{holder.get('host')}, "
            f"run {holder.get('run_id')}, since {holder.get('since')}{state})")

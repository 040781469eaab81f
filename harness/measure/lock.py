"""The host's GPU lock: the kernel flock of `harness.base.flock` plus a holder record.

The flock excludes (the kernel frees it however its holder dies); the holder record
beside it only tells waiters who holds it. The lock folder may be shared by a group, so
the record is hostile: written atomically, read bounded, anything odd is "unreadable",
never an exception or a hang; `release()` unlinks it only if it is ours."""

from __future__ import annotations

import contextlib
import getpass
import json
import math
import os
import socket
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.base.atomic import write_json
from harness.base.catalogue import ENV_LOCK_TIMEOUT
from harness.base.errors import EnvironmentFault
from harness.base.flock import Flock
from harness.base.flock import is_free as is_free  # probing a GPU lock is asked of this module
from harness.base.gpuslot import holder_path
from harness.base.readfile import InputError, read_bounded
from harness.base.timeutil import utc_now

POLL_S = 0.5
HOLDER_LIMIT = 64 * 1024  # a real record is ~300 bytes
FIELD_MAX = 160  # characters of one record field shown to a person
PATH_FIELDS = ("night_dir", "run_dir")  # compared with a folder, so kept whole (PATH_MAX)
PATH_MAX = 4096
START_TOLERANCE_S = 0.01  # how far two readings of one process's start time may differ
TEXT_FIELDS = ("host", "user", "run_id", "since", "kind", "campaign", "night_dir", "run_dir")
_UNSHOWABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, bidi, surrogates, breaks


def clean_text(value: str, limit: int = FIELD_MAX) -> str:
    """`value` as one printable line of at most `limit` characters (controls become '?')."""
    out = "".join("?" if unicodedata.category(c) in _UNSHOWABLE else c for c in value[:limit])
    return out if len(value) <= limit else out[:limit - 1] + "…"


def parse_holder(raw: bytes) -> dict:
    """The usable fields of a holder record (pure); {"unreadable": why} otherwise. Never raises."""
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        return {"unreadable": "the holder record is not UTF-8"}
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return {"unreadable": "the holder record is not valid JSON"}
    if not isinstance(doc, dict):
        return {"unreadable": "the holder record is not a JSON object"}
    rec: dict = {}
    pid = doc.get("pid")
    if type(pid) is int and 0 < pid < 2**31:
        rec["pid"] = pid
    created = doc.get("pid_create_time")
    if type(created) in (int, float) and math.isfinite(created) and 0 <= created < 1e11:
        rec["pid_create_time"] = float(created)
    for key in TEXT_FIELDS:
        if isinstance(doc.get(key), str):
            rec[key] = clean_text(doc[key], PATH_MAX if key in PATH_FIELDS else FIELD_MAX)
    return rec


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_holder(lock_path: Path) -> dict | None:
    """The holder record with `alive`; None when there is none. Bounded; never raises."""
    path = holder_path(Path(lock_path))
    try:
        raw = read_bounded(path, HOLDER_LIMIT, "holder record")
    except InputError as e:
        if not os.path.lexists(path):
            return None
        return {"unreadable": clean_text(e.message, 2 * FIELD_MAX), "alive": False}
    rec = parse_holder(raw)
    # both pid and start time must match: a recycled pid is not the holder
    rec["alive"] = "pid_create_time" in rec and "pid" in rec and pid_alive(
        rec["pid"], rec["pid_create_time"])
    return rec


def pid_alive(pid: int, created: float) -> bool:
    """Is `pid` still the process that started at `created`, not a later one reusing its number?"""
    try:
        return abs(psutil.Process(pid).create_time() - created) < START_TOLERANCE_S
    except (psutil.Error, ValueError, TypeError, OverflowError):
        return False


def describe_holder(holder: dict | None) -> str:
    """One bounded, printable line about a holder record (plain text: escape for rich)."""
    if not holder:
        return "an unknown process (no holder record)"
    if "unreadable" in holder:
        return f"an unknown process (holder record unusable: {holder['unreadable']})"
    state = "" if holder.get("alive") else ", not running any more"
    return (f"pid {holder.get('pid', '?')} ({holder.get('user', '?')}@"
            f"{holder.get('host', '?')}, run {holder.get('run_id', '?')}, "
            f"since {holder.get('since', '?')}{state})")


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


class HeldFile(Flock):
    """The flock on `path` plus the holder record: what the GPU and night locks hold."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(path, what)
        self.record: dict = {}

    def announce(self, **fields: object) -> None:
        """Write the holder record: who we are, plus `fields`. Group members replace it."""
        me = psutil.Process()
        self.record = {"pid": os.getpid(), "pid_create_time": me.create_time(),
                       "host": socket.gethostname(), "user": getpass.getuser(), **fields}
        self._write_record()

    def update(self, **fields: object) -> None:
        self.record.update(fields)
        self._write_record()

    def _write_record(self) -> None:
        # Information only: a folder planted at its name must not stop the run.
        with contextlib.suppress(OSError):
            write_json(holder_path(self.path), self.record, mode=0o664)

    def _is_our_record(self, rec: dict | None) -> bool:
        ours = self.record
        return bool(rec) and "pid" in ours and rec.get("pid") == ours["pid"] and abs(
            rec.get("pid_create_time", -1.0) - ours["pid_create_time"]) < START_TOLERANCE_S

    def release(self) -> None:
        """Unlink our holder record (only if ours), then always drop the flock. Never raises."""
        if not self.locked:
            return
        try:
            if self._is_our_record(read_holder(self.path)):
                holder_path(self.path).unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            super().release()


class GpuLock:
    """Take the lock, or wait for it showing who holds it, or time out with exit 3."""

    def __init__(self, path: Path, *, run_id: str, timeout: float,
                 on_wait: Callable[[dict | None, float], None] | None = None,
                 since: Since | None = None) -> None:
        self.path = Path(path)
        self.since = since  # a wait that began before the run (`wait_free`)
        self.run_id = run_id
        self.timeout = timeout
        self.on_wait = on_wait
        self._file = HeldFile(self.path, "GPU lock")
        self._t_acquired = 0.0
        self.held: Held | None = None

    def acquire(self) -> Held:
        self._file.prepare()
        requested, t0 = self.since or (utc_now(), time.monotonic())
        while not self._file.try_acquire(POLL_S):
            waited = time.monotonic() - t0
            if self.on_wait:
                self.on_wait(read_holder(self.path), waited)
            if waited >= self.timeout:
                raise EnvironmentFault(
                    f"timed out after {waited:.0f}s waiting for the GPU lock {self.path} "
                    f"(held by {describe_holder(read_holder(self.path))})",
                    rule=ENV_LOCK_TIMEOUT)
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


Since = tuple[str, float]  # (UTC time a wait began, its time.monotonic())


def wait_free(path: Path, timeout: float,
              on_wait: Callable[[dict | None, float], None] | None = None) -> Since:
    """Wait for the GPU lock before a run folder exists, so a Ctrl-C meanwhile leaves
    nothing behind for a run that never launched. Only probes: the launch takes the lock,
    counting its wait from when this began. Returns when the lock is free, `timeout`
    passed or it cannot be probed: when the wait began."""
    since = (utc_now(), time.monotonic())
    while True:
        try:
            if is_free(Path(path)):
                return since
        except OSError:
            return since
        waited = time.monotonic() - since[1]
        if on_wait is not None:
            on_wait(read_holder(Path(path)), waited)
        if waited >= timeout:
            return since
        time.sleep(POLL_S)

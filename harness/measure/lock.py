"""The host's GPU lock: a kernel flock plus a holder record beside it.

The kernel releases a flock when its holder dies, however it dies, so a crashed harness
never leaves the GPU locked. The holder record (`gpu.lock.holder.json`) only informs
waiters and `harness status` who holds it; it is never trusted for mutual exclusion.

The lock folder may be shared by a group (docs/reliability.md), so any member may plant a
symlink, FIFO, folder or odd JSON at any name in it. Hence, by construction:
- the lock file is opened here with O_NOFOLLOW|O_NONBLOCK, never truncated, and chmod'ed
  only when this process has just created it (O_EXCL); anything but a regular file is
  refused at once with exit 3, as is any folder or file that cannot be created or opened;
- the holder record is written through `atomic` (fresh O_EXCL temp file, rename) and read
  through `readfile.read_bounded`; a record that is not a small regular file of JSON with
  the expected field types is "unreadable", never an exception and never a hang;
- `release()` always drops the flock; it unlinks the record only if the record is ours.

Decision: filelock was replaced by `fcntl.flock` on a descriptor opened here. filelock 4.x
does open with O_NOFOLLOW, but it turns ENOENT from a folder where nothing can be created
(e.g. /proc) into a silent retry for the whole lock_timeout, carries soft-lock fallbacks
that write into the folder, and its open/chmod behaviour has changed between versions; the
few lines needed here (open, fstat, flock) are easier to audit than to pin.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import json
import math
import os
import socket
import stat
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.base.atomic import write_json
from harness.base.catalogue import ENV_LOCK_PATH, ENV_LOCK_TIMEOUT
from harness.base.errors import EnvironmentFault
from harness.base.readfile import InputError, read_bounded
from harness.base.timeutil import utc_now
from harness.base.tree import NotRegular, kind_of

POLL_S = 0.5
_SPIN_S = 0.05  # how often a waiting try_acquire retries the flock
HOLDER_LIMIT = 64 * 1024  # a real record is ~300 bytes
FIELD_MAX = 160  # characters of one record field shown to a person
START_TOLERANCE_S = 0.01  # how far two readings of one process's start time may differ
TEXT_FIELDS = ("host", "user", "run_id", "since", "kind", "campaign", "night_dir", "run_dir")
_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SYMLINK = "it is a symlink (never followed: it could point at anyone's file)"
_UNSHOWABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, bidi, surrogates, breaks


def holder_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".holder.json")


# -- the holder record: information only, hostile until parsed -------------------------

def clean_text(value: str, limit: int = FIELD_MAX) -> str:
    """`value` as one printable line of at most `limit` characters (controls become '?')."""
    out = "".join("?" if unicodedata.category(c) in _UNSHOWABLE else c for c in value[:limit])
    return out if len(value) <= limit else out[:limit - 1] + "…"


def parse_holder(raw: bytes) -> dict:
    """The usable fields of a holder record's bytes (pure). Unknown keys are dropped,
    wrong-typed fields are left out; bytes that are not a JSON object give
    {"unreadable": why}. Never raises."""
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
            rec[key] = clean_text(doc[key])
    return rec


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_holder(lock_path: Path) -> dict | None:
    """The holder record beside `lock_path` with `alive` (does its pid still run as
    recorded?); None when there is none. Bounded, non-blocking, never raises."""
    path = holder_path(Path(lock_path))
    try:
        raw = read_bounded(path, HOLDER_LIMIT, "holder record")
    except InputError as e:
        if not os.path.lexists(path):
            return None
        return {"unreadable": clean_text(e.message, 2 * FIELD_MAX), "alive": False}
    rec = parse_holder(raw)
    rec["alive"] = _alive(rec)
    return rec


def _alive(rec: dict) -> bool:
    """Both pid and start time must match: a recycled pid is not the holder."""
    if "pid" not in rec or "pid_create_time" not in rec:
        return False
    return pid_alive(rec["pid"], rec["pid_create_time"])


def pid_alive(pid: int, created: float) -> bool:
    """Is `pid` still the process that started at `created` (psutil's create time), not
    a later process that reused its number? The one answer for holder records and for
    the launcher a container's labels name."""
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


# -- the lock file: a regular file, never followed, never truncated ---------------------

def open_lock_file(path: Path, *, create: bool = True) -> int | None:
    """A descriptor on the regular file `path` to flock; None if it is missing and not
    `create`. Created 0664 when missing (only a file created here is chmod'ed). Raises
    OSError, NotRegular for a symlink, FIFO, folder or device (which is never opened)."""
    for _ in range(8):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _not_regular(st.st_mode)
        created = False
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            if not create:
                return None
            try:
                fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o664)
                created = True
            except FileExistsError:
                continue  # created by someone else between our two opens
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # swapped between lstat and open
                raise _not_regular(st.st_mode)
            if created:
                os.fchmod(fd, 0o664)  # group members must be able to open it too
        except BaseException:
            os.close(fd)
            raise
        return fd
    raise OSError(errno.EAGAIN, "it keeps being replaced while it is opened")


def _not_regular(mode: int) -> NotRegular:
    if stat.S_ISLNK(mode):
        return NotRegular(errno.ELOOP, _SYMLINK)
    return NotRegular(errno.EINVAL, f"it is a {kind_of(mode)}, not a regular file")


def _flock(fd: int) -> bool:
    """Take the flock on `fd` without waiting; False if someone else holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _still_named(fd: int, path: Path) -> bool:
    """Does `path` still name the inode we locked (nobody replaced the lock file)?"""
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _why(e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return _SYMLINK
    if e.errno == errno.ENOENT:
        return f"it cannot be created there ({e.strerror})"
    return e.strerror or str(e)


def is_free(lock_path: Path) -> bool:
    """Probe without waiting: True when nobody holds the flock (taken and dropped at once).
    A missing lock file is free and is not created. OSError if it cannot be opened."""
    fd = open_lock_file(Path(lock_path), create=False)
    if fd is None:
        return True
    try:
        return _flock(fd)
    finally:
        os.close(fd)  # drops the probe's flock too


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
        self._fd: int | None = None
        self.record: dict = {}

    def _fault(self, e: OSError) -> EnvironmentFault:
        return EnvironmentFault(f"cannot use the {self.what} {self.path}: {_why(e)}",
                                rule=ENV_LOCK_PATH)

    def prepare(self) -> None:
        """Create the lock folder; fail at once (exit 3) if that is impossible."""
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise EnvironmentFault(f"cannot create the lock folder {parent}: something that "
                                   "is not a folder is in the way", rule=ENV_LOCK_PATH) from None
        except OSError as e:
            raise EnvironmentFault(f"cannot create the lock folder {parent}: {_why(e)}",
                                   rule=ENV_LOCK_PATH) from None

    def try_acquire(self, timeout: float) -> bool:
        """Take the flock within `timeout` seconds; False if someone else holds it. A lock
        file that cannot be created or opened raises EnvironmentFault at once."""
        if self._fd is not None:
            return True
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = open_lock_file(self.path)
                if fd is None:  # not reached: create=True
                    raise FileNotFoundError(errno.ENOENT, "it vanished")
                got = _flock(fd)
            except OSError as e:
                raise self._fault(e) from None
            if got and _still_named(fd, self.path):
                self._fd = fd
                return True
            os.close(fd)  # busy, or the file was replaced before we locked it: retry
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if not got:
                time.sleep(min(_SPIN_S, left))

    @property
    def locked(self) -> bool:
        return self._fd is not None

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
            rec.get("pid_create_time", -1.0) - ours["pid_create_time"]) < 0.01

    def release(self) -> None:
        """Remove our holder record (only if it is a regular file that is ours), then
        always drop the flock. Never blocks, never raises on a hostile record."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self._is_our_record(read_holder(self.path)):
                holder_path(self.path).unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing the only descriptor drops the flock


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

    def __enter__(self) -> Held:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

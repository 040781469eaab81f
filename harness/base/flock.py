"""The one lock primitive: an exclusive kernel flock on a descriptor opened here.

A flock dies with its holder. A lock folder may be shared, so the file is opened
O_NOFOLLOW|O_NONBLOCK, never truncated, refused unless regular, and reopened if replaced
before the flock. Not the filelock library: it retries silently and writes fallbacks.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from harness.base.catalogue import ENV_LOCK_PATH, ENV_LOCK_TIMEOUT
from harness.base.errors import EnvironmentFault
from harness.base.tree import NotRegular, kind_of

SPIN_S = 0.05  # how often a waiting lock tries the flock again
SHARED_MODE = 0o664  # a lock a group shares (the GPU's, a night's), whatever the umask
PRIVATE_MODE = 0o644  # any other lock file: as the umask leaves it, like the user's files
_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SYMLINK = "it is a symlink (never followed: it could point at anyone's file)"


def open_file(path: Path, *, create: bool = True, shared: bool = True) -> int | None:
    """A descriptor on the regular file `path` to flock; None if missing and not `create`.
    Created `shared` 0664 (the only chmod); NotRegular for anything else, never opened."""
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
                fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL,
                             SHARED_MODE if shared else PRIVATE_MODE)
                created = True
            except FileExistsError:
                continue  # created by someone else between our two opens
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # swapped between lstat and open
                raise _not_regular(st.st_mode)
            if created and shared:
                os.fchmod(fd, SHARED_MODE)  # group members must be able to open it too
        except BaseException:
            os.close(fd)
            raise
        return fd
    raise OSError(errno.EAGAIN, "it keeps being replaced while it is opened")


def open_folder(path: Path, *, follow_symlinks: bool = False) -> int:
    """A descriptor on the folder `path` itself, to flock; OSError if it is none."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    return os.open(path, flags if follow_symlinks else flags | os.O_NOFOLLOW)


def _not_regular(mode: int) -> NotRegular:
    if stat.S_ISLNK(mode):
        return NotRegular(errno.ELOOP, _SYMLINK)
    return NotRegular(errno.EINVAL, f"it is a {kind_of(mode)}, not a regular file")


def take(fd: int, timeout: float | None = 0.0) -> bool:
    """Take the exclusive flock on `fd` within `timeout` seconds (0: one try; None: wait
    as long as it takes); False if someone else still holds it then."""
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(SPIN_S, left))


def still_named(fd: int, path: Path) -> bool:
    """Does `path` still name the inode we locked (nobody replaced the lock file)?"""
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def why(e: OSError) -> str:
    """Why a lock file or folder could not be used, for people."""
    if e.errno == errno.ELOOP:
        return _SYMLINK
    if e.errno == errno.ENOENT:
        return f"it cannot be created there ({e.strerror})"
    return e.strerror or str(e)


def is_free(path: Path) -> bool:
    """Probe without waiting: True when nobody holds the flock on the lock file `path`
    (taken and dropped at once). A missing file is free and is not created. OSError if
    it cannot be opened."""
    fd = open_file(Path(path), create=False)
    if fd is None:
        return True
    try:
        return take(fd)
    finally:
        os.close(fd)  # drops the probe's flock too


class Flock:
    """The exclusive flock on the lock file `path`, held from `try_acquire` to `release`;
    `what` names it in messages ("GPU lock")."""

    def __init__(self, path: Path, what: str, *, shared: bool = True) -> None:
        self.path = Path(path)
        self.what = what
        self.shared = shared
        self._fd: int | None = None

    def fault(self, e: OSError) -> EnvironmentFault:
        return EnvironmentFault(f"cannot use the {self.what} {self.path}: {why(e)}",
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
            raise EnvironmentFault(f"cannot create the lock folder {parent}: {why(e)}",
                                   rule=ENV_LOCK_PATH) from None

    def try_acquire(self, timeout: float) -> bool:
        """Take the flock within `timeout` seconds; False if someone else holds it. A lock
        file that cannot be created or opened raises EnvironmentFault at once."""
        if self._fd is not None:
            return True
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = open_file(self.path, shared=self.shared)
                if fd is None:  # not reached: create=True
                    raise FileNotFoundError(errno.ENOENT, "it vanished")
                got = take(fd)
            except OSError as e:
                raise self.fault(e) from None
            if got and still_named(fd, self.path):
                self._fd = fd
                return True
            os.close(fd)  # busy, or the file was replaced before we locked it: retry
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if not got:
                time.sleep(min(SPIN_S, left))

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the flock (closing the only descriptor drops it); never raises."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def exclusive(path: Path, what: str, *, timeout: float, shared: bool = False) -> Iterator[None]:
    """Hold the flock on the lock file `path` for the `with` body: EnvironmentFault
    ENV-LOCK-PATH when it cannot be used, ENV-LOCK-TIMEOUT when another holder keeps it
    past `timeout` seconds."""
    lock = Flock(path, what, shared=shared)
    if not lock.try_acquire(timeout):
        raise EnvironmentFault(f"timed out after {timeout:g}s waiting for the {what} {path}",
                               rule=ENV_LOCK_TIMEOUT)
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def holding(fd: int, *, timeout: float | None,
            busy: str = "another process holds the lock") -> Iterator[None]:
    """Hold the flock on the descriptor `fd` (a folder's, from `open_folder`) for the
    `with` body, then close it: EnvironmentFault ENV-LOCK-TIMEOUT, saying `busy`, when
    another holder keeps it past `timeout` seconds (None: wait as long as it takes)."""
    try:
        if not take(fd, timeout):
            raise EnvironmentFault(busy, rule=ENV_LOCK_TIMEOUT)
        yield
    finally:
        os.close(fd)  # releases the flock

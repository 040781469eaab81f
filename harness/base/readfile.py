"""The one bounded reader of input files: campaigns, contracts, observations, records.

Every input is hostile (a FIFO blocks, `/dev/zero` never ends, a symlink points anywhere):
opened without following a final symlink or blocking, regular on the descriptor, and read
up to `limit` bytes; one byte more refuses it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

DEFAULT_LIMIT = 16 * 1024 * 1024


class InputError(ValueError):
    """An input that cannot be read as a bounded regular file; `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TooLarge(ValueError):
    """More than `limit` bytes: `size` is what fstat said, None when the file grew past
    the limit while it was read."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        super().__init__(f"over the {limit} byte limit")
        self.limit = limit
        self.size = size


def read_fd(fd: int, limit: int) -> bytes:
    """Every byte from the open descriptor `fd` to its end, at most `limit` of them:
    TooLarge when fstat already says more, or once one byte past the limit has been read
    (a file that grows while it is read). OSError as the reads raise it."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise TooLarge(limit, size)
    chunks, total = [], 0
    while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise TooLarge(limit)
    return b"".join(chunks)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: Path | str, limit: int = DEFAULT_LIMIT, what: str = "file", *,
                 follow_symlinks: bool = False) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; InputError otherwise.
    A final symlink only with `follow_symlinks` (files the operator names, never evidence)."""
    name = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(name, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputError(f"{name}: the {what} is a symlink; give the file itself") from None
        raise InputError(f"{name}: cannot read the {what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{name}: the {what} is {_kind(st.st_mode)}, not a regular file")
        return read_fd(fd, limit)
    except TooLarge as e:
        size = "" if e.size is None else f" {e.size} bytes,"
        raise InputError(f"{name}: the {what} is{size} over the {limit} byte limit") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read the {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def read_text_bounded(path: Path | str, limit: int = DEFAULT_LIMIT, what: str = "file", *,
                      follow_symlinks: bool = False) -> str:
    """`read_bounded`, decoded as strict UTF-8."""
    raw = read_bounded(path, limit, what, follow_symlinks=follow_symlinks)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{os.fspath(path)}: the {what} is not UTF-8 text "
                         f"({e.reason} at byte {e.start})") from None

"""The one bounded reader of input files: campaigns, contracts, observations, records.

Every input is hostile until read: a FIFO blocks `open()` forever, `/dev/zero` never ends,
a symlink can point anywhere, and a 10 GB "campaign" exhausts memory. So an input is
opened without following a final symlink and without blocking, must be a regular file
(checked on the open descriptor, not on the path), and is read up to `limit` bytes: one
more byte means the file is refused, never silently cut.
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

    A final symlink is refused unless `follow_symlinks` (for files the operator names
    on the command line, never for anything inside evidence or the lock folder)."""
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
        if st.st_size > limit:
            raise InputError(f"{name}: the {what} is {st.st_size} bytes, over the {limit} "
                             "byte limit")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while we read it
                raise InputError(f"{name}: the {what} is over the {limit} byte limit")
        return b"".join(chunks)
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

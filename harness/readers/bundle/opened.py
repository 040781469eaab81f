"""The bundle file as it arrived: opened once, never through a link, and its sha256.

verify, merge and collect unpack from the same open file whose digest they print or
record, so they judge the very bytes they hash, whatever is renamed onto its path."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from harness.base.errors import InvalidInput
from harness.readers.bundle.sums import one_line

DIGEST_CHUNK = 1 << 20


def file_sha256(fh: BinaryIO) -> str:
    """sha256 hex of a whole open file, read in chunks from its start (the bundle as it
    arrived); the file is left at its start again."""
    digest = hashlib.sha256()
    fh.seek(0)
    while block := fh.read(DIGEST_CHUNK):
        digest.update(block)
    fh.seek(0)
    return digest.hexdigest()


@contextmanager
def open_archive(path: Path) -> Iterator[tuple[BinaryIO, str]]:
    """The bundle file `path`, opened once, and the sha256 of its bytes. A symlink is never
    followed, a FIFO never waited on; InvalidInput (exit 2) for anything but a regular file."""
    shown = one_line(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        why = "is a symlink; give the bundle itself" if os.path.islink(path) else \
            f"cannot open: {e.strerror or e}"
        raise InvalidInput(f"{shown}: {why}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(f"{shown}: not a regular file")
        yield fh, file_sha256(fh)



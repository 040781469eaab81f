"""Deterministic tar (optionally gzip) writing: same inputs, same bytes.

Fixed owners, mtime and modes; gzip gets mtime 0 and no name. Contents are hashed as
they are written, so the manifest describes exactly the bytes in the archive.

Headers are built here, as `tarfile` builds them in PAX format (the same bytes: a test
holds them equal), because `tarfile.addfile` spent more time on a thousand runs' headers
than on their contents; any name or number a plain ustar header cannot hold goes through
`tarfile` itself. gzip runs on a second thread (zlib releases the GIL), as `tar -czf` runs
gzip in a second process, and is fed in order, so the bytes do not change."""

from __future__ import annotations

import gzip
import hashlib
import queue
import tarfile
import threading
from pathlib import Path
from typing import BinaryIO

from harness.base.tree import open_beneath

FILE_MODE = 0o444  # evidence is read-only once sealed; keep it so when extracted
DIR_MODE = 0o755
GZIP_LEVEL = 6
CHUNK = 1 << 20  # handed to the writer (or the compressor) in blocks of about this size
BLOCK = tarfile.BLOCKSIZE
NUL = b"\0"


def tar_header(name: str, kind: bytes, size: int, mode: int, mtime: int) -> bytes:
    """The header `tarfile` writes in PAX format for this entry (owners 0, no user names)."""
    if kind == tarfile.DIRTYPE and not name.endswith("/"):
        name += "/"
    if not (name.isascii() and len(name) <= 100 and size < 8 ** 11 and 0 <= mtime < 8 ** 11):
        info = tarfile.TarInfo(name)
        info.type, info.size, info.mode, info.mtime = kind, size, mode, mtime
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    head = b"".join((name.encode("ascii").ljust(100, NUL), b"%07o\0" % (mode & 0o7777),
                     b"0000000\0" * 2, b"%011o\0" % size, b"%011o\0" % mtime, b" " * 8, kind,
                     NUL * 100, tarfile.POSIX_MAGIC)).ljust(BLOCK, NUL)
    return head[:148] + b"%06o\0" % sum(head) + head[155:]


class _Compressor:
    """gzip on its own thread, fed whole blocks in order through a short queue (memory flat)."""

    def __init__(self, fileobj: BinaryIO) -> None:
        self._gzip = gzip.GzipFile(filename="", mode="wb", fileobj=fileobj,
                                   compresslevel=GZIP_LEVEL, mtime=0)
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bundle-gzip", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (block := self._queue.get()) is not None:
            if self._error is None:  # after a failure, drain so the writer never blocks
                try:
                    self._gzip.write(block)
                except BaseException as e:  # raised again on the writer's thread
                    self._error = e

    def write(self, block: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(block)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        self._gzip.close()


class DeterministicTar:
    """Write a tar of regular files under one top folder with reproducible metadata."""

    def __init__(self, fileobj: BinaryIO, *, top: str, mtime: int, compress: bool) -> None:
        self.top = top
        self.mtime = int(mtime)
        # level 6, gzip's and `tar -czf`'s own: 9 took twice as long on a 200 MiB log for a
        # few percent of size (make bench, bundle_big_log_export_ratio)
        self._out: BinaryIO | _Compressor = _Compressor(fileobj) if compress else fileobj
        self._buf = bytearray()
        self._offset = 0
        self._dirs: set[str] = set()

    def _write(self, data: bytes) -> None:
        self._offset += len(data)
        if len(data) >= CHUNK:
            self._flush()
            self._out.write(data)
            return
        self._buf += data
        if len(self._buf) >= CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self._buf:
            self._out.write(bytes(self._buf))
            self._buf.clear()

    def _pad(self, size: int, unit: int = BLOCK) -> None:
        if size % unit:
            self._write(NUL * (unit - size % unit))

    def _parents(self, arcname: str) -> None:
        """Add each enclosing folder once, before its first file."""
        folder = self.top
        for part in ["", *arcname.split("/")[:-1]]:
            folder = f"{folder}/{part}" if part else folder
            if folder not in self._dirs:
                self._dirs.add(folder)
                self._write(tar_header(folder, tarfile.DIRTYPE, 0, DIR_MODE, self.mtime))

    def add_stream(self, arcname: str, fh: BinaryIO, size: int) -> str:
        """Add `size` bytes read from `fh` (a tag file, made in memory or on disk); returns
        their sha256. OSError if `fh` ends before `size` bytes."""
        self._parents(arcname)
        self._write(tar_header(f"{self.top}/{arcname}", tarfile.REGTYPE, size, FILE_MODE,
                               self.mtime))
        digest = hashlib.sha256()
        left = size
        while left:
            block = fh.read(min(left, CHUNK))
            if not block:
                raise OSError(f"{arcname}: unexpected end of data")
            digest.update(block)
            self._write(block)
            left -= len(block)
        self._pad(size)
        return digest.hexdigest()

    def add_file(self, arcname: str, root: Path, rel: str, size: int) -> str:
        """Add `size` bytes of the regular file `root/rel`. Opened beneath `root`: no symlink
        followed, no FIFO or device opened. Returns the sha256 of exactly those bytes."""
        with open(open_beneath(root, rel), "rb", buffering=0) as fh:
            return self.add_stream(arcname, fh, size)  # raises if the file shrank

    def close(self) -> None:
        self._write(NUL * (2 * BLOCK))
        self._pad(self._offset, tarfile.RECORDSIZE)
        self._flush()
        if isinstance(self._out, _Compressor):
            self._out.close()

    def __enter__(self) -> DeterministicTar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

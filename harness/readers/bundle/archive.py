"""Deterministic tar (optionally gzip) writing: same inputs, same bytes.

Fixed owners, mtime and modes; gzip gets mtime 0 and no name. Contents are hashed as
they are written, so the manifest describes exactly the bytes in the archive."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from harness.base.tree import open_beneath

FILE_MODE = 0o444  # evidence is read-only once sealed; keep it so when extracted
DIR_MODE = 0o755


class _HashingReader(io.RawIOBase):
    """Reads from a file while hashing, so hashing and archiving see the same bytes."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.digest = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        block = self.fh.read(size)
        self.digest.update(block)
        self.count += len(block)
        return block

GZIP_LEVEL = 6


class DeterministicTar:
    """Write a tar of regular files under one top folder with reproducible metadata."""

    def __init__(self, fileobj: BinaryIO, *, top: str, mtime: int, compress: bool) -> None:
        self.top = top
        self.mtime = int(mtime)
        self._gzip = (  # level 6, gzip's and `tar -czf`'s own: 9 took twice as long on a
            # 200 MiB log for a few percent of size (make bench, bundle_big_log_export_ratio)
            gzip.GzipFile(filename="", mode="wb", fileobj=fileobj, compresslevel=GZIP_LEVEL,
                          mtime=0)
            if compress else None
        )
        # Closed in close(): the tar lives as long as this writer.
        self._tar = tarfile.open(  # noqa: SIM115
            fileobj=self._gzip or fileobj, mode="w", format=tarfile.PAX_FORMAT
        )
        self._dirs: set[str] = set()

    def _info(self, name: str, kind: bytes, size: int, mode: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.size = size
        info.mode = mode
        info.mtime = self.mtime
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    def _addfile(self, info: tarfile.TarInfo, fh: BinaryIO | None = None) -> None:
        """tarfile.addfile, forgetting the entry afterwards: tarfile keeps every TarInfo it
        wrote (for getmembers, never used here), which grew with the run count."""
        self._tar.addfile(info, fh)
        self._tar.members.clear()

    def _parents(self, arcname: str) -> None:
        """Add each enclosing folder once, before its first file."""
        parts = PurePosixPath(arcname).parts[:-1]
        for i in range(len(parts) + 1):
            folder = "/".join((self.top, *parts[:i]))
            if folder not in self._dirs:
                self._dirs.add(folder)
                self._addfile(self._info(folder, tarfile.DIRTYPE, 0, DIR_MODE))

    def add_bytes(self, arcname: str, data: bytes) -> None:
        """Add a file made in memory (a tag file)."""
        self._parents(arcname)
        info = self._info(f"{self.top}/{arcname}", tarfile.REGTYPE, len(data), FILE_MODE)
        self._addfile(info, io.BytesIO(data))

    def add_stream(self, arcname: str, fh: BinaryIO, size: int) -> None:
        """Add `size` bytes read from `fh` (a tag file made on disk: too big to hold)."""
        self._parents(arcname)
        info = self._info(f"{self.top}/{arcname}", tarfile.REGTYPE, size, FILE_MODE)
        self._addfile(info, fh)

    def add_file(self, arcname: str, root: Path, rel: str, size: int) -> str:
        """Add `size` bytes of the regular file `root/rel`. Opened beneath `root`: no symlink
        followed, no FIFO or device opened. Returns the sha256 of exactly those bytes."""
        self._parents(arcname)
        info = self._info(f"{self.top}/{arcname}", tarfile.REGTYPE, size, FILE_MODE)
        with open(open_beneath(root, rel), "rb") as fh:
            reader = _HashingReader(fh)
            self._addfile(info, reader)  # raises if the file shrank below `size`
        return reader.digest.hexdigest()

    def close(self) -> None:
        self._tar.close()
        if self._gzip is not None:
            self._gzip.close()

    def __enter__(self) -> DeterministicTar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

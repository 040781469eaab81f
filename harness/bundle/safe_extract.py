"""Unpack a bundle archive that may be hostile, into a folder the caller owns.

A bundle comes from someone else, so nothing in it is trusted: only plain relative
names, only regular files and folders, a bounded number of members, and a bounded
number of bytes after decompression (which also bounds a gzip bomb). Files are written
by this module, never by `tarfile.extract`, so no member can place anything outside
`dest`. Any breach raises InvalidInput (exit 2) and the caller discards `dest`.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from harness.bundle.sums import unsafe_name_reason
from harness.errors import InvalidInput

GZIP_MAGIC = b"\x1f\x8b"
OTHER_MAGIC = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


@dataclass(frozen=True)
class Limits:
    """Bounds on what one archive may expand to."""

    max_members: int = 200_000
    max_total_bytes: int = 8 << 30  # file contents after decompression
    max_ratio: float = 200.0  # decompressed / compressed, for gzip
    ratio_floor: int = 32 << 20  # small archives may compress well; only judge past this


class _Hostile(Exception):
    """An archive that breaks a rule; the message says which."""


class _BoundedReader(io.RawIOBase):
    """Counts decompressed bytes and stops once they pass the bound or the ratio."""

    def __init__(self, fh: BinaryIO, limit: int, compressed_size: int | None, limits: Limits):
        self.fh = fh
        self.limit = limit
        self.compressed_size = compressed_size
        self.limits = limits
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        block = self.fh.read(size if size >= 0 else 1 << 20)
        self.count += len(block)
        if self.count > self.limit:
            raise _Hostile(f"expands past {self.limit} bytes (decompression bomb?)")
        if (
            self.compressed_size is not None
            and self.count > self.limits.ratio_floor
            and self.count > self.limits.max_ratio * max(self.compressed_size, 1)
        ):
            raise _Hostile(
                f"expands more than {self.limits.max_ratio:g} times its compressed size "
                "(decompression bomb?)"
            )
        return block


def _member_kind(member: tarfile.TarInfo) -> str | None:
    """Why a member's type is refused, or None for a regular file or folder."""
    if member.issym():
        return f"symlink to {member.linkname!r}"
    if member.islnk():
        return f"hard link to {member.linkname!r}"
    if member.ischr() or member.isblk():
        return "device file"
    if member.isfifo():
        return "fifo"
    if member.issparse():
        return "sparse file"
    if member.isreg() or member.isdir():
        return None
    return f"unsupported member type {member.type!r}"


def _member_name(member: tarfile.TarInfo) -> str | None:
    """The member's path to write, or None for the archive root itself (`.` or `./`)."""
    name = member.name
    if name.startswith("/"):
        raise _Hostile(f"absolute path {name!r}")
    name = name.removeprefix("./").rstrip("/") if member.isdir() else name.removeprefix("./")
    if name in ("", "."):
        return None
    reason = unsafe_name_reason(name)
    if reason:
        raise _Hostile(f"{reason}: {member.name!r}")
    return name


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, name: str) -> None:
    target = dest / name
    real_dest = os.path.realpath(dest)
    if os.path.commonpath([real_dest, os.path.realpath(target)]) != real_dest:
        raise _Hostile(f"{name!r} resolves outside the extraction folder")
    try:
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError as e:
        raise _Hostile(f"{name!r} appears twice or clashes with a folder") from e
    except (NotADirectoryError, IsADirectoryError) as e:
        raise _Hostile(f"{name!r} clashes with a file of the same name") from e
    source = tar.extractfile(member)
    with os.fdopen(fd, "wb") as out:
        if source is not None:
            while block := source.read(1 << 20):
                out.write(block)


def _open_stream(archive: Path, raw: BinaryIO, limits: Limits) -> _BoundedReader:
    magic = raw.read(6)
    raw.seek(0)
    for prefix, kind in OTHER_MAGIC.items():
        if magic.startswith(prefix):
            raise _Hostile(f"{kind} compression is not supported; use .tar or .tar.gz")
    overhead = 1024 * limits.max_members + (1 << 20)  # headers and padding
    if magic.startswith(GZIP_MAGIC):
        stream: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb")
        return _BoundedReader(stream, limits.max_total_bytes + overhead,
                              archive.stat().st_size, limits)
    return _BoundedReader(raw, limits.max_total_bytes + overhead, None, limits)


def _extract(archive: Path, dest: Path, limits: Limits) -> None:
    members = 0
    total = 0
    with open(archive, "rb") as raw:
        reader = _open_stream(archive, raw, limits)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                members += 1
                if members > limits.max_members:
                    raise _Hostile(f"more than {limits.max_members} members")
                kind = _member_kind(member)
                if kind:
                    raise _Hostile(f"{member.name!r} is a {kind}")
                total += member.size
                if total > limits.max_total_bytes:
                    raise _Hostile(
                        f"contents pass {limits.max_total_bytes} bytes (decompression bomb?)"
                    )
                name = _member_name(member)
                if name is not None:
                    _write_member(tar, member, dest, name)


def safe_extract(archive: Path, dest: Path, limits: Limits | None = None) -> Path:
    """Unpack `archive` into the empty folder `dest`; return the bundle's one top folder."""
    archive = Path(archive)
    if not archive.is_file():
        raise InvalidInput(f"{archive}: not a file")
    try:
        _extract(archive, dest, limits or Limits())
    except _Hostile as e:
        raise InvalidInput(f"{archive}: refused hostile archive: {e}") from e
    except (tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise InvalidInput(f"{archive}: not a readable tar archive: {e}") from e
    tops = sorted(os.listdir(dest))
    if len(tops) != 1 or not (dest / tops[0]).is_dir():
        raise InvalidInput(f"{archive}: not a bundle: expected one top folder, found {tops}")
    return dest / tops[0]

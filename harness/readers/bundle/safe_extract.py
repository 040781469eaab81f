"""Unpack a bundle archive that may be hostile, into a folder the caller owns.

Only plain relative names, regular files and folders, bounded members and bytes (which also
bounds a gzip bomb); files are written here, never by `tarfile.extract`, so nothing lands
outside `dest`, or only hashed and listed (a verify needs no payload on disk): one member
loop decides what a hostile member is either way. Any breach raises InvalidInput and the
caller discards `dest`.

verify, merge and collect unpack from the same open file whose digest they print or record
(`open_archive`: opened once, never through a link), so they judge the very bytes they hash,
whatever is renamed onto its path."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import stat
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from harness.base.errors import InvalidInput
from harness.base.hashing import sha256_fd
from harness.base.tree import path_problem
from harness.readers.bundle.sums import one_line

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


CHUNK = 1 << 20
TAIL = 64 << 10  # decompressed bytes kept to check past where tarfile stopped (10 KiB ahead)
MAX_META_BYTES = 1 << 20  # long-name (L/K) and pax (x/g) header data, read whole into memory
MAX_META_CHAIN = 16  # extension headers in a row before one member
META_TYPES = (
    tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
)


class _Gunzip(io.RawIOBase):
    """gzip decompression that checks what `gzip.GzipFile` only checks if read to the end: each
    member's CRC-32 and length trailer (zlib checks them), a stream that stops before its trailer,
    and bytes after the last member (refused: only gzip members may follow). `consumed` counts
    compressed bytes used, so appended junk buys no ratio."""

    def __init__(self, fh: BinaryIO):
        self.fh = fh
        self.raw_count = 0
        self.pending = b""
        self.inflate = zlib.decompressobj(31)
        self.done = False
        self.out, self.at = b"", 0  # inflated, not yet read

    def readable(self) -> bool:
        return True

    @property
    def consumed(self) -> int:
        return self.raw_count - len(self.pending)

    def _raw(self) -> bytes:
        block = self.fh.read(CHUNK)
        self.raw_count += len(block)
        return block

    def _next_member(self) -> None:
        rest = self.pending
        while len(rest) < len(GZIP_MAGIC) and (more := self._raw()):
            rest += more
        self.pending = rest
        if not rest:
            self.done = True
        elif not rest.startswith(GZIP_MAGIC):
            raise _Hostile(f"{len(rest)}+ bytes after the end of the gzip stream")
        else:
            self.inflate = zlib.decompressobj(31)

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes, served from output inflated up to CHUNK at a time: tarfile asks
        10 KiB at a time, and each bounded inflate call copies its unconsumed input."""
        if size == 0:
            return b""
        size = size if size > 0 else CHUNK
        while self.at >= len(self.out) and not self.done:
            if self.inflate.eof:
                self._next_member()
                continue
            data = self.pending or self._raw()
            if not data:
                raise EOFError("the gzip stream is cut short (no end-of-stream trailer)")
            try:
                self.out, self.at = self.inflate.decompress(data, max(size, CHUNK)), 0
            except zlib.error as e:  # a bad CRC-32 or length trailer too: unreadable, exit 2
                raise zlib.error(f"corrupt gzip stream: {e}") from e
            self.pending = self.inflate.unused_data if self.inflate.eof else (
                self.inflate.unconsumed_tail)
        block = self.out[self.at:self.at + size]
        self.at += len(block)
        return block


class _BoundedReader(io.RawIOBase):
    """Counts decompressed bytes and stops once they pass the bound or the ratio; keeps the
    last TAIL bytes so what follows tarfile's end of archive can be checked."""

    def __init__(self, fh: BinaryIO, limit: int, gunzip: _Gunzip | None, limits: Limits):
        self.fh = fh
        self.limit = limit
        self.gunzip = gunzip
        self.limits = limits
        self.count = 0
        self.tail = bytearray()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        block = self.fh.read(size if size >= 0 else CHUNK)
        self.count += len(block)
        self.tail += block
        if len(self.tail) > 4 * TAIL:  # trimmed now and then: a memmove per 10 KiB read was dear
            del self.tail[:-TAIL]
        if self.count > self.limit:
            raise _Hostile(f"expands past {self.limit} bytes (decompression bomb?)")
        if (
            self.gunzip is not None
            and self.count > self.limits.ratio_floor
            and self.count > self.limits.max_ratio * max(self.gunzip.consumed, 1)
        ):
            raise _Hostile(
                f"expands more than {self.limits.max_ratio:g} times its compressed size "
                "(decompression bomb?)"
            )
        return block


@dataclass
class _MetaBudget:
    """Bounds the extension headers tarfile reads whole into memory, checked before it reads
    them: each, each run of them before one member, and all global (g) headers together."""

    chain: int = 0
    chain_bytes: int = 0
    global_bytes: int = 0

    def check(self, info: tarfile.TarInfo) -> None:
        if info.type == tarfile.GNUTYPE_SPARSE:
            raise _Hostile(f"{info.name!r} is a sparse file")
        if info.type not in META_TYPES:
            self.chain = self.chain_bytes = 0
            return
        self.chain += 1
        self.chain_bytes += info.size
        if info.type == tarfile.XGLTYPE:
            self.global_bytes += info.size
        if max(info.size, self.chain_bytes, self.global_bytes) > MAX_META_BYTES:
            raise _Hostile(
                f"a tar extension header (type {info.type!r}) holds more than "
                f"{MAX_META_BYTES} bytes"
            )
        if self.chain > MAX_META_CHAIN:
            raise _Hostile(f"more than {MAX_META_CHAIN} tar extension headers in a row")


def _guarded_tarinfo(budget: _MetaBudget) -> type[tarfile.TarInfo]:
    """A TarInfo whose headers pass `budget` before tarfile reads any data they announce. Every
    header, long-name and pax ones included, goes through `_proc_member`, tarfile's hook."""

    def _no_sparse(*_args: object) -> None:
        raise _Hostile("a pax sparse file")

    class _Guarded(tarfile.TarInfo):
        def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
            budget.check(self)
            return super()._proc_member(tar)  # type: ignore[misc]

        # pax sparse maps (the 1.0 map is read from the member's data, unbounded)
        _proc_gnusparse_00 = _proc_gnusparse_01 = _proc_gnusparse_10 = _no_sparse

    return _Guarded


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
    reason = path_problem(name)  # exactly the names a seal can hold
    if reason:
        raise _Hostile(f"{reason}: {member.name!r}")
    return name


class _Sink:
    """Where members go: beneath `dest`, an empty folder the caller owns. Every member is hashed
    and listed; with `keep`, only the members it names are written, the rest only hashed.

    Names are checked here, in memory, so one rule decides a duplicate or a clash whether or not
    the member is written. Every folder beneath `dest` is made here, one `mkdir` after its
    parent, so none on a member's path can be a symlink and nothing lands outside `dest`; files
    are created O_EXCL|O_NOFOLLOW and hashed from the very bytes written."""

    def __init__(self, dest: Path, keep: Callable[[str], bool] | None = None) -> None:
        self.dest = os.fspath(dest)  # joined as strings: ~20,000 members at 1,000 runs
        os.makedirs(self.dest, exist_ok=True)
        self.real_dest = os.path.realpath(dest)
        self.made: set[str] = {""}  # folders on disk
        self.dirs: set[str] = {""}  # folders the archive holds, written or not
        self.sizes: dict[str, int] = {}
        self.digests: dict[str, str] = {}
        self.keep = keep

    def _inside(self, name: str) -> None:
        real = os.path.realpath(os.path.join(self.dest, name))
        if os.path.commonpath([self.real_dest, real]) != self.real_dest:
            raise _Hostile(f"{name!r} resolves outside the extraction folder")

    def _declare(self, folder: str, name: str, make: bool) -> None:
        """`folder` and its parents are folders; a file of any of their names is a clash. With
        `make`, each is made on disk too, one `mkdir` after its parent."""
        if folder in (self.made if make else self.dirs):
            return
        parts = folder.split("/")
        for depth in range(1, len(parts) + 1):
            above = "/".join(parts[:depth])
            if above in self.sizes:
                raise _Hostile(f"{name!r} clashes with a file of the same name")
            self.dirs.add(above)
            if make and above not in self.made:
                if depth == 1:
                    self._inside(above)
                os.mkdir(os.path.join(self.dest, above), 0o755)
                self.made.add(above)

    def _create(self, name: str, parent: str) -> int:
        if not parent:
            self._inside(name)
        return os.open(os.path.join(self.dest, name),
                       os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)

    def write(self, tar: tarfile.TarFile, member: tarfile.TarInfo, name: str) -> None:
        parent = name.rpartition("/")[0]
        kept = self.keep is None or self.keep(name)
        folder = member.isdir()
        if name in self.sizes or (not folder and name in self.dirs):
            raise _Hostile(f"{name!r} appears twice or clashes with a folder")
        try:
            self._declare(name if folder else parent, name, kept)
            if folder:
                return
            fd = self._create(name, parent) if kept else None
        except FileExistsError as e:
            raise _Hostile(f"{name!r} appears twice or clashes with a folder") from e
        except (NotADirectoryError, IsADirectoryError) as e:
            raise _Hostile(f"{name!r} clashes with a file of the same name") from e
        digest = hashlib.sha256()
        try:
            for block in _contents(tar, member):
                digest.update(block)
                view = memoryview(block)
                while fd is not None and view:
                    view = view[os.write(fd, view):]
        finally:
            if fd is not None:
                os.close(fd)
        self.sizes[name] = member.size
        self.digests[name] = digest.hexdigest()


def _contents(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Iterator[bytes]:
    """A regular member's bytes, read straight from the stream its header came from: in "r|"
    mode they follow it, and `extractfile`'s file object per member cost more than the read."""
    stream = tar.fileobj
    assert stream is not None
    stream.seek(member.offset_data)  # where it already is; forward only in a stream
    left = member.size
    while left:
        block = stream.read(min(left, CHUNK))
        if not block:
            raise tarfile.ReadError("unexpected end of data")
        left -= len(block)
        yield block


@dataclass(frozen=True)
class Unpacked:
    """A bundle unpacked by `unpack`: its top folder and, relative to it, every file's size and
    sha256 and every folder, written to disk or not."""

    root: Path
    sizes: dict[str, int]
    digests: dict[str, str]
    dirs: set[str]


def _open_stream(raw: BinaryIO, limits: Limits) -> _BoundedReader:
    magic = raw.read(6)
    raw.seek(0)
    for prefix, kind in OTHER_MAGIC.items():
        if magic.startswith(prefix):
            raise _Hostile(f"{kind} compression is not supported; use .tar or .tar.gz")
    overhead = 1024 * limits.max_members + (1 << 20)  # headers and padding
    if magic.startswith(GZIP_MAGIC):
        gunzip = _Gunzip(raw)
        return _BoundedReader(gunzip, limits.max_total_bytes + overhead, gunzip, limits)
    return _BoundedReader(raw, limits.max_total_bytes + overhead, None, limits)


def _check_end(tar: tarfile.TarFile, reader: _BoundedReader) -> None:
    """Refuse anything but NUL padding from where tarfile stopped reading members (the
    end-of-archive blocks, or a header it could not parse) to the end of the stream: other
    tar readers would find more members there."""
    end = tar.offset
    kept_from = reader.count - len(reader.tail)
    if not kept_from <= end <= reader.count:
        raise _Hostile("cannot tell where the archive ends")
    if reader.tail[end - kept_from:].count(0) != reader.count - end:
        raise _Hostile(f"data after the end of the archive (offset {end})")
    while block := reader.read(CHUNK):
        if block.count(0) != len(block):
            raise _Hostile(f"data after the end of the archive (offset {end})")


def _extract(raw: BinaryIO, limits: Limits, sink: _Sink) -> None:
    members = 0
    total = 0
    reader = _open_stream(raw, limits)
    guarded = _guarded_tarinfo(_MetaBudget())
    with tarfile.open(fileobj=reader, mode="r|", tarinfo=guarded) as tar:
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
                sink.write(tar, member, name)
            tar.members.clear()  # tarfile keeps every header it read; memory stays flat
        _check_end(tar, reader)


def unpack(archive: Path, dest: Path, limits: Limits | None = None, *,
           opened: BinaryIO | None = None, keep: Callable[[str], bool] | None = None
           ) -> Unpacked:
    """Unpack `archive` into the empty folder `dest`, which no one else may write to. `opened`:
    the archive already open, so a caller unpacks the very bytes it hashed, whatever is renamed
    onto `archive`. `keep`: which members (named with their top folder) are written; every
    member is checked, hashed and listed all the same."""
    archive = Path(archive)
    shown = one_line(str(archive))  # messages reach a terminal: names and paths escaped
    if opened is None and not archive.is_file():
        raise InvalidInput(f"{shown}: not a file")
    sink = _Sink(dest, keep)
    try:
        with open(archive, "rb") if opened is None else contextlib.nullcontext(opened) as raw:
            _extract(raw, limits or Limits(), sink)
    except _Hostile as e:
        raise InvalidInput(f"{shown}: refused hostile archive: {one_line(str(e))}") from e
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise InvalidInput(f"{shown}: not a readable tar archive: {one_line(str(e))}") from e
    tops = sorted({n.partition("/")[0] for n in [*sink.sizes, *sink.dirs] if n})
    if len(tops) != 1 or tops[0] not in sink.dirs:
        raise InvalidInput(
            f"{shown}: not a bundle: expected one top folder, found {one_line(str(tops))}"
        )
    prefix = tops[0] + "/"
    cut = len(prefix)
    return Unpacked(Path(dest) / tops[0], {n[cut:]: s for n, s in sink.sizes.items()},
                    {n[cut:]: h for n, h in sink.digests.items()},
                    {n[cut:] for n in sink.dirs if n.startswith(prefix)})


def file_sha256(fh: BinaryIO) -> str:
    """sha256 hex of a whole open file from its start (the bundle as it arrived), by the one
    file hasher; the file is left at its start again."""
    fh.seek(0)
    digest = sha256_fd(fh.fileno())
    fh.seek(0)
    return digest


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

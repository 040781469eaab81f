"""The one walker of evidence trees: run folders, addenda, bundles, recovery.

Every name in a run folder is hostile (the workload wrote it), so this walker never
follows a symlink (each directory opened O_NOFOLLOW relative to its parent), opens only
directories while walking (files later through `open_regular` / `open_beneath`, regular
files only), and says whether each name can be sealed (`name_problem`).
"""

from __future__ import annotations

import errno
import os
import stat
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 64  # deeper folders are reported, not entered
MAX_NAME_BYTES = 255  # NAME_MAX on Linux: a longer component cannot be created anywhere
MAX_PATH_BYTES = 1024  # a longer relative path is not sealed: `sha256sum -c` opens it
# whole, and PATH_MAX (4096) must still hold it below a bundle's or reviewer's prefix
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# Categories a sealable name may not contain (controls, format characters, line separators,
# surrogates): some tool breaks lines at, or escapes, each of them.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class NotRegular(OSError):
    """The path is not a regular file (or is a symlink where none is allowed)."""


@dataclass(frozen=True)
class Entry:
    """One thing found in a tree. `rel` is POSIX, relative to the root."""

    rel: str
    kind: str  # file | dir | symlink | fifo | socket | char-device | block-device | other
    size: int
    mode: int
    name_problem: str | None = None
    target: str | None = None  # a symlink's target, for the record only
    too_deep: bool = False  # a folder below MAX_DEPTH: listed, never entered

    @property
    def is_file(self) -> bool:
        return self.kind == "file"

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


_KINDS = ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
          (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char-device"),
          (stat.S_ISBLK, "block-device"))


def kind_of(mode: int) -> str:
    return next((kind for test, kind in _KINDS if test(mode)), "other")


def name_problem(name: str) -> str | None:
    """Why one path component cannot be sealed, or None. Pure."""
    if name in ("", ".", ".."):
        return f"the name {name!r} is not a plain file name"
    if name.isascii() and name.isprintable() and "/" not in name and "\\" not in name:
        return None  # the common case, decided without a per-character category lookup
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "the name is not UTF-8"
    if "/" in name:
        return "the name contains '/'"
    if "\\" in name:
        return "the name contains a backslash"
    for ch in name:
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            return f"the name contains the control or separator character U+{ord(ch):04X}"
    return None


def path_problem(rel: str) -> str | None:
    """Why a relative POSIX path cannot be sealed, or None. Pure."""
    if not rel or rel.startswith("/"):
        return f"{rel!r} is not a relative path"
    if rel == "-":  # `sha256sum -c` reads standard input for a line naming "-"
        return "the name '-' means standard input to sha256sum"
    if too_long(rel):
        return f"the path is longer than {MAX_PATH_BYTES} bytes"
    for part in rel.split("/"):
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            return f"a name is longer than {MAX_NAME_BYTES} bytes"
        problem = name_problem(part)
        if problem:
            return problem
    return None


def printable(rel: str) -> str:
    """A one-line, ASCII-safe rendering of a hostile path for messages and records."""
    out = []
    for ch in rel:
        if ch == "\\":
            out.append("\\\\")
        elif 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif unicodedata.category(ch) in _BAD_CATEGORIES or not ch.isprintable():
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return "".join(out)


def _open_dir(name: str, dir_fd: int | None, expect: os.stat_result | None) -> int:
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    if expect is not None:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (expect.st_dev, expect.st_ino):
            os.close(fd)
            raise NotRegular(errno.ESTALE, "the folder changed while it was walked", name)
    return fd


class TooMany(OSError):
    """A tree holds more entries than the caller's bound: it was not listed whole."""


def walk(root: Path | str, max_entries: int | None = None) -> list[Entry]:
    """Every entry below the real folder `root`, parents before children, sorted. With
    `max_entries`, TooMany as soon as a hostile tree is known to be larger."""
    try:
        fd = _open_dir(os.fspath(root), None, None)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotRegular(errno.ENOTDIR, "not a real folder", os.fspath(root)) from None
        raise
    out: list[Entry] = []
    try:
        _walk(fd, "", "", out, 1, max_entries)
    finally:
        os.close(fd)
    return out


def _listing(dir_fd: int, room: int | None) -> list[tuple[str, os.stat_result]]:
    found = []
    with os.scandir(dir_fd) as it:
        for e in it:
            if room is not None and len(found) >= room:
                raise TooMany(errno.EFBIG, "more entries than the bound allows")
            found.append((e.name, e.stat(follow_symlinks=False)))
    return sorted(found, key=lambda x: x[0].encode("utf-8", "surrogateescape"))


def _walk(dir_fd: int, prefix: str, problem: str | None, out: list[Entry], depth: int,
          max_entries: int | None = None) -> None:
    room = None if max_entries is None else max_entries - len(out)
    for name, st in _listing(dir_fd, room):
        rel = prefix + name
        own = problem or name_problem(name)
        kind = kind_of(st.st_mode)
        target = None
        if kind == "symlink":
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError:
                target = None
        too_deep = kind == "dir" and depth >= MAX_DEPTH
        if max_entries is not None and len(out) >= max_entries:
            raise TooMany(errno.EFBIG, "more entries than the bound allows")
        out.append(Entry(rel, kind, st.st_size, st.st_mode, own, target, too_deep))
        if kind == "dir" and not too_deep:
            child = _open_dir(name, dir_fd, st)
            try:
                _walk(child, rel + "/", own, out, depth + 1, max_entries)
            finally:
                os.close(child)


def listed(sizes: Mapping[str, int], dirs: Iterable[str]) -> list[Entry]:
    """What `walk` would return for a tree of regular files (`sizes`: {rel: size}) and folders
    (`dirs`) known without a disk, say streamed from an archive whose names were checked: the
    same order, the same depth limit (a folder at MAX_DEPTH listed, never entered). Pure."""
    def key(rel: str) -> list[bytes]:
        return [part.encode("utf-8", "surrogateescape") for part in rel.split("/")]

    out = [Entry(rel, "file", size, stat.S_IFREG | 0o444) for rel, size in sizes.items()
           if rel.count("/") < MAX_DEPTH]
    out += [Entry(rel, "dir", 0, stat.S_IFDIR | 0o755, too_deep=rel.count("/") + 1 >= MAX_DEPTH)
            for rel in dirs if rel and rel.count("/") < MAX_DEPTH]
    return sorted(out, key=lambda e: key(e.rel))


def open_regular(path: Path | str, *, dir_fd: int | None = None,
                 follow_symlinks: bool = False) -> int:
    """Open a regular file for reading without ever blocking or reading a device; checked
    on the descriptor, so a swap gains nothing. A final symlink only with `follow_symlinks`."""
    flags = _FILE_FLAGS if not follow_symlinks else _FILE_FLAGS & ~os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_symlinks:
            raise NotRegular(errno.ELOOP, "is a symlink", os.fspath(path)) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegular(errno.EINVAL, f"is a {kind_of(st.st_mode)}, not a regular file",
                         os.fspath(path))
    return fd


def open_beneath(root: Path | str, rel: str) -> int:
    """Open `root/rel` as a regular file, following no symlink on the way (not even in the
    folders between): the file really is inside `root`."""
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") for p in parts):
        raise NotRegular(errno.EINVAL, "not a plain relative path", rel)
    fd = _open_dir(os.fspath(root), None, None)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return open_regular(parts[-1], dir_fd=fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotRegular(e.errno, "a folder on the way is a symlink or not a folder",
                             rel) from None
        raise
    finally:
        os.close(fd)


def too_long(rel: str) -> bool:
    """Is this relative path too long to seal (see MAX_PATH_BYTES)? Pure."""
    return len(rel.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES


def files(entries: list[Entry]) -> list[str]:
    """The regular files among `entries`, as relative paths (sorted, as walked)."""
    return [e.rel for e in entries if e.is_file]


# ---- acting on one entry, never through a symlink ------------------------------------------

_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir_beneath(root: Path | str, rel: str) -> int:
    """Open the folder `root/rel` ("" is `root` itself), following no symlink on the way."""
    fd = _open_dir(os.fspath(root), None, None)
    if not rel:
        return fd
    try:
        for part in rel.split("/"):
            if part in ("", ".", ".."):
                raise NotRegular(errno.EINVAL, "not a plain relative path", rel)
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotRegular(e.errno, "a folder on the way is a symlink or not a folder",
                             rel) from None
        raise


def _split(rel: str) -> tuple[str, str]:
    parent, _, name = rel.rpartition("/")
    if name in ("", ".", ".."):
        raise NotRegular(errno.EINVAL, "not a plain relative path", rel)
    return parent, name


def chmod_beneath(root: Path | str, rel: str, mode: int,
                  owner: tuple[int, int] | None = None) -> None:
    """Set the mode (and `owner`, where allowed) of `root/rel` ("" is `root`) through an
    O_PATH descriptor, so a symlink (whose chmod would change its target) is refused."""
    if rel:
        parent, name = _split(rel)
        dfd = open_dir_beneath(root, parent)
        try:
            fd = os.open(name, _PATH_FLAGS, dir_fd=dfd)
        finally:
            os.close(dfd)
    else:
        fd = os.open(os.fspath(root), _PATH_FLAGS)
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise NotRegular(errno.EINVAL, f"is a {kind_of(st.st_mode)}; its mode is left "
                             "alone", rel or os.fspath(root))
        pinned = f"/proc/self/fd/{fd}"  # the pinned inode itself, not a path
        if owner is not None and os.geteuid() == 0 and (st.st_uid, st.st_gid) != owner:
            os.chown(pinned, *owner)
        os.chmod(pinned, mode)
    finally:
        os.close(fd)


def remove_beneath(root: Path | str, rel: str) -> None:
    """Remove `root/rel` and everything below a real folder, following no symlink.
    Sub-folders are renamed up into one staging folder before they are emptied, so no
    recursion or chain of descriptors grows with a hostile tree's depth."""
    parent, name = _split(rel)
    dfd = open_dir_beneath(root, parent)
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dfd)
            return
        stage = f".harness-removing-{os.getpid()}-{os.urandom(4).hex()}"
        os.mkdir(stage, 0o700, dir_fd=dfd)
        sfd = os.open(stage, _DIR_FLAGS, dir_fd=dfd)
        try:
            os.rename(name, "0", src_dir_fd=dfd, dst_dir_fd=sfd)
            _empty_stage(sfd)
        finally:
            os.close(sfd)
        os.rmdir(stage, dir_fd=dfd)
    finally:
        os.close(dfd)


def _empty_stage(sfd: int) -> None:
    pending, counter = ["0"], 1
    while pending:
        name = pending.pop()
        fd = os.open(name, _DIR_FLAGS, dir_fd=sfd)
        try:
            os.fchmod(fd, 0o700)  # a hostile 0o000 folder must still be emptied
            with os.scandir(fd) as it:
                children = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            for child, is_dir in children:
                if is_dir:
                    os.rename(child, str(counter), src_dir_fd=fd, dst_dir_fd=sfd)
                    pending.append(str(counter))
                    counter += 1
                else:
                    os.unlink(child, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=sfd)

"""Atomic, durable file writes: temp file in the same folder, fsync, rename, fsync folder.

Evidence must never be half-written. The folder may be shared or written by a workload,
so the temp file is created O_EXCL|O_NOFOLLOW under an unpredictable name (a planted name
is never written through), and the rename replaces, never follows, what is at the target.
The shared logs beside the run folders are appended, never rewritten (`append_bytes`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.base.tree import NotRegular

_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NAME_KEEP = 200  # of the target's name in the temp name: NAME_MAX is 255


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_name(path: Path) -> Path:
    """A fresh, unguessable sibling of `path` (`.<name>.tmp-<128 random bits>`)."""
    return path.with_name(f".{path.name[:_NAME_KEEP]}.tmp-{secrets.token_hex(16)}")


def _create_temp(path: Path, mode: int) -> tuple[Path, int]:
    for _ in range(8):
        tmp = temp_name(path)
        try:
            return tmp, os.open(tmp, _TMP_FLAGS, mode)
        except FileExistsError:  # someone planted exactly this name: draw another
            continue
    raise FileExistsError(f"cannot create a fresh temp file beside {path}")


def write_bytes(path: Path, data: bytes, *, exclusive: bool = False, mode: int = 0o644) -> None:
    """Write `data` to `path` atomically. With `exclusive`, refuse to replace an existing file."""
    path = Path(path)
    if exclusive and os.path.lexists(path):
        raise FileExistsError(f"{path} exists; evidence is append-only")
    tmp, fd = _create_temp(path, mode)
    try:
        os.fchmod(fd, mode)  # exactly `mode`, whatever the umask; fd is our new inode
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        if exclusive:
            # link() fails if the target exists, so two writers cannot both win.
            os.link(tmp, path, follow_symlinks=False)
            tmp.unlink()
        else:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def append_bytes(path: Path, data: bytes, *, header: bytes = b"") -> None:
    """Append `data` to the shared log or index `path` (made if absent, `header` first when
    it is empty), durably. Never through a planted link, never blocked by a FIFO: it is
    opened non-blocking and anything but a regular file is refused, so a name planted in a
    runs folder cannot hang a run that has just sealed."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                 | os.O_CLOEXEC, 0o644)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", os.fspath(path))
        view = memoryview((header if st.st_size == 0 else b"") + data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text(path: Path, text: str, **kw: Any) -> None:
    write_bytes(path, text.encode("utf-8"), **kw)


def dumps_json(obj: Any) -> str:
    """The one JSON layout evidence files use: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def iter_json_spliced(obj: Any, lists: dict[str, Iterable[str]]) -> Iterator[str]:
    """`dumps_json` of `obj` with each one-item placeholder list `[key]` replaced by the
    already encoded items `lists[key]` yields, so long lists are never held whole. The
    placeholders must be unguessable: the document may hold hostile strings."""
    text = dumps_json(obj)
    found = []
    for key, items in lists.items():
        pattern = re.compile(r"\[\n( +)" + re.escape(json.dumps(key)) + r"\n( *)\]")
        matches = list(pattern.finditer(text))
        if len(matches) != 1:
            raise ValueError(f"placeholder {key!r} found {len(matches)} times")
        found.append((matches[0], items))
    pos = 0
    for match, items in sorted(found, key=lambda f: f[0].start()):
        yield text[pos:match.start()]
        indent, first = match.group(1), True
        for item in items:
            yield ("[\n" if first else ",\n") + indent + item.replace("\n", "\n" + indent)
            first = False
        yield "[]" if first else "\n" + match.group(2) + "]"
        pos = match.end()
    yield text[pos:]


def write_json(path: Path, obj: Any, **kw: Any) -> None:
    write_text(path, dumps_json(obj), **kw)

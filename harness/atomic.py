"""Atomic, durable file writes: temp file in the same folder, fsync, rename, fsync folder.

Evidence must never be half-written: a reader sees either nothing or the whole file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes, *, exclusive: bool = False, mode: int = 0o644) -> None:
    """Write `data` to `path` atomically. With `exclusive`, refuse to replace an existing file."""
    path = Path(path)
    if exclusive and path.exists():
        raise FileExistsError(f"{path} exists; evidence is append-only")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
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
            os.link(tmp, path)
            tmp.unlink()
        else:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text(path: Path, text: str, **kw: Any) -> None:
    write_bytes(path, text.encode("utf-8"), **kw)


def dumps_json(obj: Any) -> str:
    """The one JSON layout evidence files use: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(path: Path, obj: Any, **kw: Any) -> None:
    write_text(path, dumps_json(obj), **kw)

"""Reading one member of an evidence tree: bounded, never through a symlink, strict JSON.

Every file a bundle reads (a run's records at export, a bundle's tag files at verify) may
be hostile: a FIFO that blocks, a symlink out of the tree, a 10 GB "manifest", a JSON
document nested 100,000 deep or holding a 5000-digit integer (which `json.loads` turns
into RecursionError / ValueError). Here each such file is a `BadMember` with a precise
reason, which callers report as a problem of that file; nothing escapes as a crash.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from harness.instrument.harness_observer.encode import depth
from harness.tree import open_beneath

TAG_LIMIT = 64 << 20  # a manifest of 200,000 files is about 25 MiB
MAX_DEPTH = 64  # the statement nests about 12 deep; a run record about 4
MAX_INT_DIGITS = 64  # sizes, counts, exit codes; digests are strings


class BadMember(ValueError):
    """A member that cannot be read or parsed as what it should be; str() says why."""


def read_member(root: Path, rel: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file `root/rel`, following no symlink on the way, at most
    `limit` (default TAG_LIMIT) of them."""
    limit = TAG_LIMIT if limit is None else limit
    try:
        fd = open_beneath(root, rel)
    except OSError as e:
        raise BadMember(f"cannot read: {e.strerror or e}") from None
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise BadMember(f"{size} bytes, over the {limit} byte limit")
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise BadMember(f"over the {limit} byte limit")
        return b"".join(chunks)
    except OSError as e:
        raise BadMember(f"cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def read_text_member(root: Path, rel: str, limit: int | None = None) -> str:
    """`read_member` as strict UTF-8."""
    raw = read_member(root, rel, limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadMember(f"not UTF-8 ({e.reason} at byte {e.start})") from None


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BadMember(f"an integer of {len(text)} digits (more than {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadMember(f"the number {text[:40]} is out of range")
    return value


def _constant(name: str) -> Any:
    raise BadMember(f"{name} is not JSON")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Duplicate keys are refused: tools disagree on which one wins, so a document with
    two `subject` keys could show each tool a different list."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadMember(f"the key {key[:40]!r} appears twice in one object")
        out[key] = value
    return out


def parse_json(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """Strict JSON: no NaN/Infinity, no duplicate keys, short integers, bounded nesting.
    Pure; BadMember for anything else."""
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant,
                           object_pairs_hook=_object)
    except RecursionError:
        raise BadMember(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as e:
        raise BadMember(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:  # BadMember from a hook, or int()/float() refusing
        raise BadMember(str(e) if isinstance(e, BadMember) else f"not JSON: {e}") from None
    if depth(value, max_depth) > max_depth:
        raise BadMember(f"nested deeper than {max_depth} levels")
    return value

"""Reading one member of an evidence tree: bounded, never through a symlink, strict JSON.

Any file a bundle reads may be hostile: a blocking FIFO, a symlink out of the tree, a
huge "manifest", JSON nested 100,000 deep or a 5000-digit integer (RecursionError /
ValueError in `json.loads`). Each is a `BadMember` with a reason, never a crash."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.readfile import TooLarge, read_fd
from harness.base.tree import open_beneath
from harness.instrument.harness_observer.encode import depth

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
        return read_fd(fd, limit)
    except TooLarge as e:
        size = "" if e.size is None else f"{e.size} bytes, "
        raise BadMember(f"{size}over the {limit} byte limit") from None
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


@dataclass(slots=True)
class Pruned:
    """An object of a parsed document that the reader does not keep (`parse_json(keep=)`):
    only how deeply it nested, so the depth bound still holds for the whole document."""

    depth: int


def _depth(value: Any, limit: int) -> int:
    """`encode.depth`, counting a pruned object as deep as it was."""
    if isinstance(value, Pruned):
        return value.depth
    if not isinstance(value, dict | list):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= limit:
        item, level = stack.pop()
        deepest = max(deepest, level)
        for child in (item.values() if isinstance(item, dict) else item):
            if isinstance(child, Pruned):
                deepest = max(deepest, level + child.depth)
            elif isinstance(child, dict | list):
                stack.append((child, level + 1))
    return deepest


def _pruning(keep: Callable[[dict[str, Any]], bool], limit: int
             ) -> Callable[[list[tuple[str, Any]]], Any]:
    def hook(pairs: list[tuple[str, Any]]) -> Any:
        out = _object(pairs)
        nested = _depth(out, limit)
        if nested > limit:
            raise BadMember(f"nested deeper than {limit} levels")
        return out if keep(out) else Pruned(nested)
    return hook


def parse_json(text: str, max_depth: int = MAX_DEPTH,
               keep: Callable[[dict[str, Any]], bool] | None = None) -> Any:
    """Strict JSON: no NaN/Infinity, no duplicate keys, short integers, bounded nesting. Pure;
    BadMember otherwise. With `keep`, objects it rejects are checked then dropped while
    parsing, so a large document costs the memory of what the reader keeps."""
    hook = _object if keep is None else _pruning(keep, max_depth)
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant,
                           object_pairs_hook=hook)
    except RecursionError:
        raise BadMember(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as e:
        raise BadMember(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:  # BadMember from a hook, or int()/float() refusing
        raise BadMember(str(e) if isinstance(e, BadMember) else f"not JSON: {e}") from None
    if (depth(value, max_depth) if keep is None else _depth(value, max_depth)) > max_depth:
        raise BadMember(f"nested deeper than {max_depth} levels")
    return value

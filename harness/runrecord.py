"""Reading a run folder's `run.json`: bounded, strict, and never a crash.

The record may have been damaged or forged after sealing, so it is read like any hostile
input: a regular file only (no FIFO, no symlink), size-capped, strict JSON, an object,
not nested deeper than a run record ever is. Anything else is invalid input (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import InvalidInput
from harness.readfile import InputError, read_text_bounded

RECORD = "run.json"
RECORD_LIMIT = 16 * 1024 * 1024
MAX_DEPTH = 32  # run.json is 3 levels deep; deeper is not a run record


def _depth_ok(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `doc` nests no deeper than `limit` (iterative: no recursion to exhaust)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > limit:
                return False
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
    return True


def load_record(run_dir: Path) -> dict:
    """run.json as a dict; InvalidInput (exit 2) with the reason for anything else."""
    path = Path(run_dir) / RECORD
    try:
        doc = json.loads(read_text_bounded(path, RECORD_LIMIT, what="run record"))
    except InputError as e:
        raise InvalidInput(f"{run_dir}: no readable run.json ({e.message})") from None
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    except (ValueError, RecursionError) as e:  # a >4300-digit integer; nesting past the stack
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise InvalidInput(f"{path}: not valid JSON ({why})") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path}: not a run record (a JSON {type(doc).__name__}, "
                           "not an object)")
    if not _depth_ok(doc):
        raise InvalidInput(f"{path}: not a run record (nested deeper than {MAX_DEPTH} levels)")
    return doc



"""What a refused row of the morning summary says inline: its Gate-0 values and the next
commands (`harness rerun`, `harness diff`), so the operator does not have to open the run.

Every value is made inert and capped, and commands are quoted for a POSIX shell, so a
hostile path can neither run nor forge text."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.states import Status
from harness.readers.report.inert import inert

MAX_FIELDS = 5  # Gate-0 fields shown per row; `harness show` lists every one
VALUE_CHARS = 160
REASON_PLACEHOLDER = "WHY"  # the operator says why (recorded in the rerun's run.json)
OTHER_PLACEHOLDER = "OTHER"  # no accepted run of the control known: the operator names one


MAX_HOLDERS = 8  # processes named for one shared configuration object


def holders(difference: Mapping[str, Any]) -> str | None:
    """The process a difference is in, or every process that holds its one configuration
    object (`engine-core, worker-0`), as the verdict names them; None when it names none."""
    held = difference.get("processes")
    if isinstance(held, list) and len(held) > 1 and all(isinstance(p, str) for p in held):
        return ", ".join(inert(p, 40) for p in held[:MAX_HOLDERS])
    process = difference.get("process")
    return inert(process, 40) if isinstance(process, str) else None


def gate0_values(differences: Any) -> list[dict]:
    """[{"field", "process", "startup", "generation"}] as inert, capped text, at most
    MAX_FIELDS, plus {"more": n} when the verdict names more."""
    found = [d for d in differences if isinstance(d, Mapping)] \
        if isinstance(differences, list) else []
    out: list[dict] = [{
        "field": inert(d.get("field"), 200),
        "process": holders(d),
        "startup": inert(d.get("startup"), VALUE_CHARS),
        "generation": inert(d.get("generation"), VALUE_CHARS),
    } for d in found[:MAX_FIELDS]]
    if len(found) > MAX_FIELDS:
        out.append({"more": len(found) - MAX_FIELDS})
    return out


def gate0_lines(values: Sequence[Mapping[str, Any]]) -> list[str]:
    """`in engine-core: compilation.custom_ops: start-up [...], generation [...]`."""
    out = []
    for v in values:
        if "more" in v:
            out.append(f"… and {v['more']} more fields (harness show lists them)")
            continue
        where = f"in {v['process']}: " if v.get("process") else ""
        out.append(f"{where}{v['field']}: start-up {v['startup']}, generation "
                   f"{v['generation']}")
    return out


def shell_arg(path: str) -> str:
    """A path as one inert word of a POSIX shell command a reader copies: a folder named
    `x; rm -rf ~` stays one argument."""
    return shlex.quote(inert(path, 1000))


def commands(entry: Mapping[str, Any], other: str | None) -> list[str]:
    """The commands to go on from a row that did not end accepted: for the slot's newest attempt,
    rerun it and diff it against `other` (an accepted run of its control, when the report knows one,
    else the placeholder OTHER); for a superseded attempt, only the diff against the attempt that
    superseded it (`other`)."""
    path = entry.get("path") or entry.get("run_dir")
    if not path or entry.get("status") == Status.ACCEPTED:
        return []
    out = []
    if not entry.get("superseded_by"):
        out.append(f"harness rerun {shell_arg(path)} --reason {REASON_PLACEHOLDER}")
    out.append(f"harness diff {shell_arg(path)} {shell_arg(other) if other else OTHER_PLACEHOLDER}")
    return out


def runs_dir_of(night_dir: str | None) -> str | None:
    """RUNS_DIR of a night folder RUNS_DIR/nights/<night>, where its runs' folders are."""
    if not night_dir:
        return None
    return os.path.dirname(os.path.dirname(os.path.abspath(night_dir)))

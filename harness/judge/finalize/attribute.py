"""Which engine call changed a field between two checkpoints of the transition trace.

Gate 0 says *that* a field differs between start-up and generation, not *which call* made
it differ. The in-container trace (harness_observer.trace) records every
enter/exit of the hooked calls and every change of a watched field. `attribute` replays it
and names, for each change between two checkpoints, the hooked calls that were open when it
happened, each with its ordinal on that config in that process, so a reader sees
"VllmConfig.__post_init__ #2 > RocmPlatform.apply_config_platform_defaults #2" and not a
bare global call counter.

The trace is written by the workload, so it is hostile: it is read bounded, line by line,
and a line that is not a well-formed record is counted and skipped, never trusted. Pure
except `read_trace`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.base.readfile import InputError, read_text_bounded
from harness.config.imagegatespec import CHECKPOINTS
from harness.instrument.harness_observer.encode import DecodeError, loads

MAX_BYTES = 64 * 1024 * 1024
MAX_ORDINAL = 1 << 20  # more post-inits of one config than any engine runs
MAX_NAME = 200  # a hook or label longer than this is not one the instrument writes


def read_trace(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The trace's records in file order, and how many lines were not records.

    A missing file reads as no records (the instrument may not have run): the judge
    decides what that means. An unreadable one raises harness.base.readfile.InputError."""
    if not os.path.lexists(path):
        return [], 0
    return parse_trace(read_text_bounded(path, MAX_BYTES, "transition trace"))


def parse_trace(text: str) -> tuple[list[dict[str, Any]], int]:
    """The records of a trace's text (already read, bounded), and how many lines were not
    records."""
    records, bad = [], 0
    for line in text.splitlines():
        try:
            record = loads(line)
        except DecodeError:
            bad += 1
            continue
        if _well_formed(record):
            records.append(record)
        else:
            bad += 1
    return records, bad


def _name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and value.isprintable()


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _well_formed(record: Any) -> bool:
    """The keys `attribute` reads have the types the instrument writes."""
    if not isinstance(record, dict) or not _int(record.get("pid")):
        return False
    event = record.get("event")
    if event in ("enter", "exit"):
        return (_name(record.get("hook")) and _int(record.get("call"))
                and _int(record.get("config_id")))
    if event == "snapshot":
        return _name(record.get("label"))
    if event == "change":
        hook, call = record.get("hook"), record.get("call")
        return (_name(record.get("field")) and (hook is None or _name(hook))
                and (call is None or _int(call)) and "before" in record and "after" in record)
    return event == "error"


def _site(stack: Any) -> str | None:
    """The innermost caller frame, when the record carries a list of frames."""
    if isinstance(stack, list) and stack and isinstance(stack[-1], str):
        return stack[-1][:1000]
    return None


class _Replay:
    """Open hooked calls per process, with each call's ordinal on its config."""

    def __init__(self) -> None:
        self.open: dict[int, list[tuple[int, str]]] = {}  # pid -> [(call, "hook #n")]
        self.counts: dict[tuple[int, str, int], int] = {}

    def enter(self, r: dict[str, Any]) -> None:
        """The call's ordinal: the one the instrument counted on the config itself, which
        travels with it into the engine core and the workers (`ordinal`), else the calls
        on that config object seen in this process."""
        key = (r["pid"], r["hook"], r["config_id"])
        self.counts[key] = self.counts.get(key, 0) + 1
        ordinal = r.get("ordinal")
        if not _int(ordinal) or not 0 < ordinal <= MAX_ORDINAL:
            ordinal = self.counts[key]
        self.open.setdefault(r["pid"], []).append((r["call"], f"{r['hook']} #{ordinal}"))

    def exit(self, r: dict[str, Any]) -> None:
        stack = self.open.get(r["pid"], [])
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] == r["call"]:
                del stack[i:]  # an exit closes its call and anything left open inside it
                return

    def within(self, pid: int) -> list[str]:
        return [name for _, name in self.open.get(pid, [])]


def attribute(records: list[dict[str, Any]], field: str, start: str,
              end: str) -> dict[str, Any]:
    """The changes of `field` after the last `start` checkpoint and up to the first `end`
    checkpoint after it, each with the hooked calls open when it happened (outermost
    first). `found` says whether both checkpoints were seen; `errors` counts the trace's
    own error records (a trace that failed may have missed a change)."""
    replay, window, closed = _Replay(), False, False
    changes: list[dict[str, Any]] = []
    errors = 0
    for r in records:
        event = r["event"]
        if event == "enter":
            replay.enter(r)
        elif event == "exit":
            replay.exit(r)
        elif event == "error":
            errors += 1
        elif event == "snapshot" and r["label"] == start:
            window, closed, changes = True, False, []
        elif event == "snapshot" and r["label"] == end and window and not closed:
            closed = True
        elif event == "change" and window and not closed and r["field"] == field:
            changes.append({"field": field, "before": r["before"], "after": r["after"],
                            "hook": r["hook"], "pid": r["pid"],
                            "process": r["process"] if _name(r.get("process")) else None,
                            "within": replay.within(r["pid"]), "site": _site(r.get("stack")),
                            "same_list": _same(r.get("id_before"), r.get("id_after"))})
    return {"field": field, "start": start, "end": end, "found": window and closed,
            "changes": changes, "errors": errors}


def _json(value: Any) -> str:
    """A trace value as JSON text (decoded from the trace: always encodable); kept as
    written, made inert where it is printed."""
    return json.dumps(value, ensure_ascii=False)


def _same(before: Any, after: Any) -> bool | None:
    """Whether the field is still the same object (a list changed in place), when known."""
    return before == after if _int(before) and _int(after) else None


LIST = {True: "on the same list, changed in place", False: "on a new list put in its place",
        None: "on a list the trace does not identify"}


def answer(result: dict[str, Any]) -> list[str]:
    """The trace's answer, one line per change: which call changed the field, in which
    process, at which source line, on which list (the one it had, or a new one), and the
    values; `describe`'s line when the trace holds no change to answer with."""
    if not result["found"] or not result["changes"]:
        return [describe(result)]
    out = []
    for c in result["changes"]:
        call = " > ".join(c["within"]) or "no hooked call (seen at a checkpoint)"
        process = f"{c['process'] or 'a process'} (pid {c['pid']})"
        out.append(f"{result['field']}: {call}, in {process}, at {c['site'] or 'no source line'}"
                   f", {LIST[c['same_list']]}: {_json(c['before'])} -> {_json(c['after'])}")
    return out


def trace_answers(path: Path, fields: list[str]) -> list[str]:
    """`answer` for each field, from the trace at `path` between the instrument's start-up
    and generation checkpoints; nothing when the run kept no trace."""
    if not os.path.lexists(path):
        return []
    try:
        records, _ = read_trace(path)
    except InputError as e:
        return [e.message]
    return [line for f in fields for line in answer(attribute(records, f, *CHECKPOINTS))]


def describe(result: dict[str, Any]) -> str:
    """One line per change, for the post-step's output and `show`."""
    if not result["found"]:
        return (f"{result['field']}: the trace has no '{result['start']}' checkpoint "
                f"followed by '{result['end']}'")
    if not result["changes"]:
        return f"{result['field']}: unchanged between '{result['start']}' and '{result['end']}'"
    lines = []
    for c in result["changes"]:
        where = " > ".join(c["within"]) or "no hooked call (detected at a checkpoint)"
        lines.append(f"{result['field']} changed in {where}")
    return "\n".join(lines)

"""The lines a night (or a rerun of one of its runs) ends with: its headline per control,
both summary files, and the next steps.

The headline is read back from summary.json (bounded), so the terminal and the report
never count differently."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.base.plural import counted
from harness.base.readfile import InputError, read_bounded
from harness.base.states import Status
from harness.readers.report.inert import inert
from harness.readers.report.steps import shell_arg
from harness.readers.report.unrun import not_executed_lines

SUMMARY_JSON = "summary.json"
# One bound for every reader of summary.json: a year of nightly trends is about 6 MiB, so
# ten times that is no summary the harness wrote, and `ls` reads one night's at a time.
SUMMARY_LIMIT = 64 * 1024 * 1024


def summary_bytes(night_dir: Path) -> bytes:
    """The night's summary.json, read as hostile (the runs dir may be writable by others): a
    regular file, no symlink, bounded; InputError saying why not."""
    return read_bounded(Path(night_dir) / SUMMARY_JSON, SUMMARY_LIMIT, what="night summary")


def summary_doc(night_dir: Path) -> dict | None:
    """The night's summary.json as a JSON object; None when it is missing, unreadable, not
    JSON or not an object (the callers then show less, never fail)."""
    try:
        doc = json.loads(summary_bytes(night_dir))
    except (InputError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def to_rerun(summary: Mapping[str, Any], retried: Collection[str] = ()) -> int:
    """How many controls `rerun --failed` would take: newest attempts that did not end
    accepted and have a run folder (a planned or deferred slot has none), less those a
    resume of the night retries (`retried`: run ids)."""
    runs = summary.get("runs") if isinstance(summary.get("runs"), list) else []
    return sum(1 for e in runs if isinstance(e, dict) and not e.get("superseded_by")
               and e.get("run_id") and e.get("status") != Status.ACCEPTED
               and e.get("status") in tuple(Status) and e.get("run_id") not in retried)


def end_lines(night_dir: Path, written: Sequence[Path], summary: Mapping[str, Any] | None,
              resume: str | None = None, retried: Collection[str] = ()) -> list[str]:
    """`controls: …`, `not executed: …` for each slot left unrun, `summary: …` for each file
    written, and `next: …` commands: `resume` (the command that continues the night, when
    it can) first, `rerun --failed` only for runs that ended and no resume retries. Pure."""
    out = []
    if summary and isinstance(summary.get("headline"), str):
        out.append(f"controls: {inert(summary['headline'], 400)}")
    if summary:  # what a stopped walk left unrun, and why
        out += [f"not executed: {line}" for line in not_executed_lines(summary)]
    # a path is shown inert (a night folder's name comes from the campaign's) and quoted
    out += [f"summary: {inert(str(p), 1000)}" for p in written if p.suffix in (".md", ".html")]
    where = shell_arg(str(night_dir))
    if resume:
        out.append(f"next: start the night again to resume: {inert(resume, 2000)}")
    if summary and (n := to_rerun(summary, retried)):
        out.append(f"next: harness rerun --failed {where} --reason WHY   "
                   f"({counted(n, 'control')} to rerun once fixed)")
    if written:
        out.append(f"next: harness report {where}")
    return out


def night_end_lines(night_dir: Path, written: Sequence[Path], resume: str | None = None,
                    retried: Collection[str] = ()) -> list[str]:
    """`end_lines` with the night's summary.json (None when it was not written)."""
    summary = summary_doc(night_dir) if any(p.name == SUMMARY_JSON for p in written) else None
    return end_lines(Path(night_dir), written, summary, resume, retried)

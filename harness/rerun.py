"""Operator reruns: the same control again as a new attempt, linked both ways.

The original folder is sealed and read-only, so the backward link lives in the new run's
run.json (`rerun_of`) and the forward link ("rerun by") lives outside run folders: in the
night's journal when the original belongs to a night, and always in `reruns.jsonl` beside
the run folders, appended (O_APPEND, one line per write, fsync) and never rewritten.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.config.loader import require_campaign
from harness.errors import HarnessError, InvalidInput
from harness.night import rules
from harness.night.journal import JOURNAL_NAME, Journal, Row
from harness.night.nightlock import NightLock
from harness.night.runner import record_status
from harness.pipeline.context import new_run_id
from harness.pipeline.run import make_context, run_control
from harness.readfile import InputError, read_bounded
from harness.runrecord import load_record
from harness.seal import SUMS
from harness.timeutil import utc_now
from harness.ui import Reporter
from harness.verdict import exit_code

INDEX = "reruns.jsonl"
INDEX_LIMIT = 64 * 1024 * 1024


def append_index(runs_dir: Path, entry: dict) -> None:
    """Append one JSON line to `runs_dir/reruns.jsonl`, durably, never rewriting it."""
    line = (json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode()
    fd = os.open(runs_dir / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def fold_index(lines: list[str]) -> dict[str, dict]:
    """Pure: rerun run_id -> its latest entry (a `finished` line supersedes `started`).
    Lines that are not JSON objects (a torn last line) are skipped."""
    out: dict[str, dict] = {}
    for line in lines:
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):  # torn, not JSON, or nested past the stack
            continue
        if isinstance(entry, dict) and isinstance(entry.get("rerun"), dict):
            out[str(entry["rerun"].get("run_id"))] = entry
    return out


def reruns_of(run_dir: Path) -> list[dict]:
    """The reruns of the run in `run_dir`, oldest first, from the index beside it:
    [{"run_id", "path", "reason", "status", "at"}]."""
    run_dir = Path(run_dir)
    try:  # bounded, regular files only: a FIFO or a huge index must not hang `show`
        raw = read_bounded(run_dir.parent / INDEX, INDEX_LIMIT, what="rerun index")
    except InputError:
        return []
    out = []
    for rid, e in fold_index(raw.decode("utf-8", "replace").splitlines()).items():
        original = e.get("original")
        if isinstance(original, dict) and original.get("run_id") == run_dir.name:
            out.append({"run_id": rid, "path": e["rerun"].get("path"), "reason": e.get("reason"),
                        "status": e.get("status"), "at": e.get("at")})
    return sorted(out, key=lambda r: str(r["at"]))


def night_of(run_id: str, nights_dirs: list[Path]) -> Path | None:
    """The night folder whose journal holds `run_id`, if any (damaged journals skipped)."""
    for nights in nights_dirs:
        if not nights.is_dir():
            continue
        for night in sorted(nights.iterdir(), reverse=True):
            journal_path = night / JOURNAL_NAME
            if not journal_path.is_file():
                continue
            try:
                with Journal.open(journal_path, readonly=True) as j:
                    if j.by_run_id(run_id) is not None:
                        return night
            except HarnessError:
                continue
    return None


@dataclass
class RerunResult:
    run_dir: Path
    status: str
    exit_code: int
    night: Path | None


def read_original(run_dir: Path) -> dict:
    record = load_record(run_dir)
    if not record.get("run_id"):
        raise InvalidInput(f"{run_dir}/run.json: not a run record")
    if not (run_dir / SUMS).is_file():
        raise InvalidInput(f"{run_dir} is not sealed (no {SUMS}); only a finished run is rerun")
    return record


def rerun(run_dir: Path, reason: str, *, ui: Reporter, runs_dir: Path | None = None,
          lock_timeout: float | None = None) -> RerunResult:
    """Run the original's control again from its campaign file, as a new linked attempt."""
    if not reason.strip():
        raise InvalidInput("--reason must say why the run is repeated")
    run_dir = Path(os.path.abspath(run_dir))
    original = read_original(run_dir)
    camp_file = (original.get("campaign") or {}).get("file")
    control_name = (original.get("control") or {}).get("name")
    if not camp_file or not control_name:
        raise InvalidInput(f"{run_dir}/run.json names no campaign file or control")
    loaded = require_campaign(Path(camp_file))
    if control_name not in loaded.controls:
        raise InvalidInput(f"campaign {camp_file} no longer has control {control_name!r}")
    runs_dir = Path(os.path.abspath(runs_dir or run_dir.parent))
    runs_dir.mkdir(parents=True, exist_ok=True)
    run_id = original["run_id"]
    night = night_of(run_id, [runs_dir / "nights", run_dir.parent / "nights"])

    lock = NightLock(loaded.lock_path, kind="rerun", campaign=loaded.campaign.name)
    lock.acquire(timeout=lock_timeout or loaded.campaign.lock_timeout, on_wait=ui.waiting)
    journal = Journal.open(night / JOURNAL_NAME) if night else None
    try:
        new_id = new_run_id(control_name)
        new_dir = runs_dir / new_id
        lock.describe_as(run_dir=str(new_dir))
        attempt = int(original.get("attempt") or 1) + 1
        row = None
        if journal is not None:
            row = journal.add_rerun(run_id, reason)
            attempt = row.attempt
            row = journal.mark_running(row, new_id, str(new_dir))
        link = {"run_id": run_id, "path": str(run_dir), "reason": reason}
        entry = {"original": {"run_id": run_id, "path": str(run_dir)},
                 "rerun": {"run_id": new_id, "path": str(new_dir)}, "reason": reason,
                 "night": str(night) if night else None}
        append_index(runs_dir, {**entry, "at": utc_now(), "status": "running"})
        ctx = make_context(loaded, control_name, runs_dir, ui, rerun_of=link, attempt=attempt,
                           run_id=new_id)
        try:
            status, reasons = run_control(ctx, lock_timeout=lock_timeout)
        except HarnessError as e:  # lock timeout, no engine: the folder was sealed as refused
            _finish(journal, row, runs_dir, entry, "refused",
                    f"{e.rule or 'HARNESS-ERROR'}: {e.message}")
            raise
        _finish(journal, row, runs_dir, entry, status, rules.reason_text(reasons))
        return RerunResult(new_dir, status, exit_code(status, reasons), night)
    finally:
        if journal is not None:
            journal.close()
        lock.release()


def _finish(journal: Journal | None, row: Row | None, runs_dir: Path, entry: dict,
            status: str, text: str) -> None:
    if journal is not None and row is not None:
        record_status(journal, row, status, text)
    append_index(runs_dir, {**entry, "at": utc_now(), "status": status})

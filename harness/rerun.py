"""Operator reruns: the same control again as a new attempt, linked both ways.

The original folder is sealed and read-only, so the backward link lives in the new run's
run.json (`rerun_of`) and the forward link ("rerun by") lives outside run folders: in the
night's journal when the original belongs to a night, and always in `reruns.jsonl` beside
the run folders, appended (O_APPEND, one line per write, fsync) and never rewritten.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from harness.config.loader import require_campaign
from harness.driver.drive import run_one
from harness.driver.local import LocalExecutor
from harness.driver.plan import LaunchRequest, Outcome, new_request
from harness.errors import HarnessError, InvalidInput
from harness.night.journal import JOURNAL_NAME, Journal, Row
from harness.night.nightlock import NightLock
from harness.readfile import InputError, read_bounded
from harness.runfolder import record as run_record
from harness.runfolder.layout import RECORD, SUMS
from harness.runfolder.record import RunRecord
from harness.timeutil import utc_now
from harness.ui import Reporter

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


def read_original(run_dir: Path) -> RunRecord:
    record = run_record.read(run_dir)
    if not record.run_id:
        raise InvalidInput(f"{run_dir}/{RECORD}: not a run record")
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
    camp_file = (original.campaign or {}).get("file")
    control_name = (original.control or {}).get("name")
    if not camp_file or not control_name:
        raise InvalidInput(f"{run_dir}/{RECORD} names no campaign file or control")
    loaded = require_campaign(Path(camp_file))
    if control_name not in loaded.controls:
        raise InvalidInput(f"campaign {camp_file} no longer has control {control_name!r}")
    runs_dir = Path(os.path.abspath(runs_dir or run_dir.parent))
    runs_dir.mkdir(parents=True, exist_ok=True)
    run_id = original.run_id
    night = night_of(run_id, [runs_dir / "nights", run_dir.parent / "nights"])

    lock = NightLock(loaded.lock_path, kind="rerun", campaign=loaded.campaign.name)
    lock.acquire(timeout=lock_timeout or loaded.campaign.lock_timeout, on_wait=ui.waiting)
    journal = Journal.open(night / JOURNAL_NAME) if night else None
    try:
        link = {"run_id": run_id, "path": str(run_dir), "reason": reason}
        request = new_request(control_name, runs_dir, attempt=(original.attempt or 1) + 1,
                              rerun_of=link)
        lock.describe_as(run_dir=str(request.run_dir))
        recorder = RerunRecorder(runs_dir, journal, night, link)
        request = recorder.plan(request)
        outcome = run_one(request, LocalExecutor(loaded, ui, lock_timeout=lock_timeout),
                          recorder)
        if outcome.error is not None:  # recorded failed; the operator sees the error itself
            raise outcome.error
        return RerunResult(outcome.run_dir, outcome.status, outcome.exit_code, night)
    finally:
        if journal is not None:
            journal.close()
        lock.release()


class RerunRecorder:
    """Records a rerun where its forward link lives: the original's night journal (if it
    has one) and always reruns.jsonl beside the run folders."""

    def __init__(self, runs_dir: Path, journal: Journal | None, night: Path | None,
                 link: dict) -> None:
        self.runs_dir = runs_dir
        self.journal = journal
        self.night = night
        self.link = link
        self.row: Row | None = None

    def plan(self, request: LaunchRequest) -> LaunchRequest:
        """Add the rerun to the journal as a new attempt; it numbers the attempt."""
        if self.journal is None:
            return request
        self.row = self.journal.add_rerun(self.link["run_id"], self.link["reason"])
        return replace(request, attempt=self.row.attempt)

    def _entry(self, request: LaunchRequest, status: str) -> dict:
        return {"original": {"run_id": self.link["run_id"], "path": self.link["path"]},
                "rerun": {"run_id": request.run_id, "path": str(request.run_dir)},
                "reason": self.link["reason"],
                "night": str(self.night) if self.night else None,
                "at": utc_now(), "status": status}

    def started(self, request: LaunchRequest) -> None:
        if self.journal is not None and self.row is not None:
            self.row = self.journal.mark_running(self.row, request.run_id,
                                                 str(request.run_dir))
        append_index(self.runs_dir, self._entry(request, "running"))

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None:
        if self.journal is not None and self.row is not None:
            self.journal.finish(self.row, outcome.status, outcome.reason_text)
        append_index(self.runs_dir, self._entry(request, outcome.status))

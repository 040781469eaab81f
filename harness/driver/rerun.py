"""Operator reruns: the same control again as a new attempt, linked both ways.

A rerun reads the control as it is on disk now (`plan_rerun`), so a fix runs; the plan
says how its seal and its unsealed read-write mounts differ from the original's: a plain
repeat only when both are unchanged. Under `require_approval` an uncovered seal is refused
before any folder, row or lock. The original is read-only, so the forward link lives in
the night's journal and always in `reruns.jsonl` (appended, never rewritten)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.base.errors import HarnessError, InvalidInput
from harness.base.plural import counted
from harness.base.states import State, Status
from harness.config.checkout import inside, of_run
from harness.config.loader import Loaded, require_campaign
from harness.driver.drive import run_one
from harness.driver.local import LocalExecutor
from harness.driver.night.nightlock import NightLock
from harness.driver.night.runner import Summarize, rewrite_summary
from harness.driver.plan import LaunchRequest, Outcome, new_request
from harness.judge.difference import (
    file_changes,
    mount_words,
    mounts_topic,
    read_json,
    recorded_mounts,
    seal_files,
)
from harness.measure import mountdigest
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME, NIGHTS
from harness.measure.nightfolder.rows import Row, latest_attempts
from harness.measure.runfolder import inputs as kept
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.layout import PREFLIGHT, RECORD
from harness.measure.runfolder.reruns import append_index, index_entry
from harness.measure.runfolder.runjson import RunRecord
from harness.measure.runfolder.sealed import read_record
from harness.measure.seal import SourceSeal, source_seal
from harness.measure.ui import Reporter
from harness.probe.approval.runcheck import before_run


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
    status: Status
    exit_code: int
    night: Path | None
    summary: list[Path] = field(default_factory=list)  # the night's rewritten summary files


@dataclass
class RerunPlan:
    """What a rerun will use (campaign and control on disk now, their seal) and how the seal
    differs from the original's (`changes`; None when its file list is unreadable)."""

    run_dir: Path
    original: RunRecord
    loaded: Loaded
    control: str
    seal: SourceSeal
    changes: dict[str, list[str]] | None
    why_unknown: str | None = None
    # `judge.difference.mounts_topic`, the original against now; None: not compared, not known
    mounts: dict | None = None

    @property
    def unchanged(self) -> bool:
        return self.seal.digest == self.original.seal

    def files(self) -> list[Path]:
        """The input files the rerun reads (campaign, control, images.lock)."""
        control_file = self.loaded.controls[self.control][1]
        out = [self.loaded.campaign_file, control_file]
        return out + ([self.loaded.image_lock_file] if self.loaded.image_lock_file else [])


def seal_lines(plan: RerunPlan) -> list[str]:
    """Pure: whether (and how) the seal and the mounts outside it changed."""
    topic = plan.mounts or {"same": None, "mounts": [], "note": "not compared"}
    rows = [r for r in topic["mounts"] if r["same"] is not True]
    mounts = [f"  mount {mount_words(r)}" for r in rows]
    if not rows and topic["same"] is not True:
        mounts.append(f"  mounts: not known ({topic.get('note')})")
    if plan.unchanged and topic["same"] is True:
        same = [str(r["target"]) for r in topic["mounts"]]
        return ["plain repeat: seal unchanged" + (
            f", mounts unchanged ({', '.join(same)})" if same else "")]
    if plan.unchanged:
        return [("not a plain repeat: seal unchanged, but a mount's content changed"
                 if topic["same"] is False else "repeat not known: seal unchanged, but a "
                 "mount's content is not known"), *mounts]
    if plan.changes is None:
        return [f"seal changed: the original's file list is unreadable ({plan.why_unknown})",
                *mounts]
    names = [f"  {kind} {name}" for kind in ("added", "removed", "changed")
             for name in plan.changes[kind]]
    return [f"seal changed: {counted(len(names), 'file')}", *names, *mounts]


def campaign_of(run_dir: Path, original: RunRecord, root: Path) -> Path:
    """The campaign file the record names, which must lie inside the checkout `root`."""
    named = (original.campaign or {}).get("file")
    if not named:
        raise InvalidInput(f"{run_dir}/{RECORD} names no campaign file")
    if not inside(Path(named), root):
        raise InvalidInput(f"{run_dir}/{RECORD} names campaign {named!r}, outside the checkout "
                           f"{root} (the git work tree holding the run's runs folder, else the "
                           "current folder's): a rerun runs only that checkout's campaigns "
                           "(name the campaign with --campaign)")
    return Path(named)


def plan_rerun(run_dir: Path, *, campaign: Path | None = None) -> RerunPlan:
    """The original's control from the campaign file on disk now, and the seal it gives
    against the original's. Reads only. A `latest` symlink is followed once, here: the rerun
    belongs beside the real folder."""
    root = of_run(run_dir)  # the operator's address of the run decides, not its record
    run_dir = Path(os.path.realpath(run_dir))
    original = read_record(run_dir)  # verified: an edited run.json never chooses a rerun
    camp_file = campaign or campaign_of(run_dir, original, root)
    control_name = (original.control or {}).get("name")
    if not control_name:
        raise InvalidInput(f"{run_dir}/{RECORD} names no control")
    loaded = require_campaign(Path(camp_file))
    if control_name not in loaded.controls:
        raise InvalidInput(f"campaign {camp_file} no longer has control {control_name!r}")
    new_seal = source_seal(loaded.project_dir, loaded.files())
    preflight = read_json(run_dir / PREFLIGHT, "preflight record", [])
    files, why = seal_files(preflight, original.seal)
    changes = file_changes(files, new_seal.files) if files is not None else None
    control, control_file = loaded.controls[control_name]
    now = mountdigest.digest_mounts(control, control_file, loaded.may_mount,
                                    mountdigest.cache_path(os.environ))
    mounts = mounts_topic(recorded_mounts(preflight, kept.read_kept_json(run_dir,
                                                                         "resolved")[0]),
                          ({m.target: m.record() for m in now}, None))
    return RerunPlan(run_dir, original, loaded, control_name, new_seal, changes, why, mounts)


def check_reason(reason: str) -> None:
    """A rerun reason is recorded in run.json, the journal and reruns.jsonl: it must say
    something, in text UTF-8 can hold (a lone surrogate would fail those writes half-way)."""
    if not reason.strip():
        raise InvalidInput("--reason must say why the run is repeated")
    try:
        reason.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInput(f"--reason is not UTF-8 text (byte {reason[e.start]!a} at "
                           f"character {e.start})") from None


def execute(plan: RerunPlan, reason: str, *, ui: Reporter, runs_dir: Path | None = None,
            lock_timeout: float | None = None, night: Path | None = None,
            summarize: Summarize | None = None) -> RerunResult:
    """Launch a planned rerun under the night lock, linked both ways; for a night's run,
    `summarize(night)` rewrites its summary once the journal changed, even on failure."""
    check_reason(reason)
    run_dir, loaded, run_id = plan.run_dir, plan.loaded, plan.original.run_id
    runs_dir = Path(os.path.abspath(runs_dir or run_dir.parent))
    # refused before any folder or journal row exists; preflight asks again and seals it
    before_run(loaded, runs_dir, seal=plan.seal.digest)
    runs_dir.mkdir(parents=True, exist_ok=True)
    night = night or night_of(run_id, [runs_dir / NIGHTS, run_dir.parent / NIGHTS])

    lock = NightLock(loaded.lock_path, kind="rerun", campaign=loaded.campaign.name)
    lock.acquire(timeout=lock_timeout or loaded.campaign.lock_timeout, on_wait=ui.waiting)
    journal: Journal | None = None
    recorder: RerunRecorder | None = None
    written: list[Path] = []
    try:
        journal = Journal.open(night / JOURNAL_NAME) if night else None
        link = {"run_id": run_id, "path": str(run_dir), "reason": reason}
        request = new_request(plan.control, runs_dir,
                              attempt=(plan.original.attempt or 1) + 1, rerun_of=link)
        lock.describe_as(run_dir=str(request.run_dir))
        recorder = RerunRecorder(runs_dir, journal, night, link)
        request = recorder.plan(request)
        outcome = run_one(request, LocalExecutor(loaded, ui, lock_timeout=lock_timeout),
                          recorder)
        if outcome.error is not None:  # recorded failed; the operator sees the error itself
            raise outcome.error
        result = RerunResult(outcome.run_dir, outcome.status, outcome.exit_code, night)
    finally:
        try:
            if journal is not None:
                journal.close()
            if night is not None and recorder is not None and recorder.row is not None:
                written = rewrite_summary(night, summarize, ui)  # its rows changed
        finally:
            lock.release()
    result.summary = written
    return result


def sealed_with(run_dir: Path) -> str | None:
    """The source seal a (new) run recorded, or None when its record is unreadable."""
    try:
        return run_record.read(run_dir).seal
    except HarnessError:
        return None


# What `rerun --failed` repeats: every end but accepted.
RERUN_STATES = frozenset(State.of(s) for s in Status if s != Status.ACCEPTED)


def failed_rows(rows: list[Row]) -> list[Row]:
    """Pure: each slot's newest attempt that did not succeed and has a run folder."""
    latest = latest_attempts(rows)
    return [latest[i] for i in sorted(latest)
            if latest[i].state in RERUN_STATES and latest[i].run_dir]


def night_failures(night_dir: Path) -> list[Path]:
    """The run folders `rerun --failed` repeats, from the night's journal (read-only). A
    journal may be forged: each row's folder must be named for its run id directly in the
    night's runs folder, none twice, else nothing is rerun (exit 2)."""
    night_dir = Path(os.path.abspath(night_dir))
    path = night_dir / JOURNAL_NAME
    if not path.is_file():
        raise InvalidInput(f"{night_dir}: not a night folder (no {JOURNAL_NAME})")
    with Journal.open(path, readonly=True) as j:
        rows = failed_rows(j.rows())
    runs_dir = os.path.realpath(night_dir.parent.parent)
    seen: set[str] = set()
    out: list[Path] = []
    for r in rows:
        where = os.path.realpath(str(r.run_dir))
        if (not r.run_id or os.path.dirname(where) != runs_dir
                or os.path.basename(where) != r.run_id):
            raise InvalidInput(  # repr: the journal's text with every control escaped
                f"{path}: row {r.id} names run folder {r.run_dir!r} for run {r.run_id!r}, "
                f"not a folder named for it in {runs_dir}: a night's runs live there")
        if where in seen:
            raise InvalidInput(f"{path}: run folder {r.run_dir!r} is named by more than "
                               "one slot")
        seen.add(where)
        out.append(night_dir.parent.parent / r.run_id)
    return out


class RerunRecorder:
    """Records a rerun in the original's night journal (if any) and reruns.jsonl."""

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

    def _entry(self, request: LaunchRequest, status: Status | str) -> dict:
        return index_entry(self.link, request.run_id, request.run_dir, self.night, status)

    def started(self, request: LaunchRequest) -> None:
        if self.journal is not None and self.row is not None:
            self.row = self.journal.mark_running(self.row, request.run_id,
                                                 str(request.run_dir))
        append_index(self.runs_dir, self._entry(request, State.RUNNING))

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None:
        if self.journal is not None and self.row is not None:
            self.journal.finish(self.row, outcome.status, outcome.reasons)
        append_index(self.runs_dir, self._entry(request, outcome.status))

"""The night loop: resume or start a night, then run its controls one by one.

Order of every step: the journal records the state change (committed), then the action
happens. Before each control the doctor checks the host; a failing host defers the
control (nothing is launched) and the loop goes on with the next one. Past the deadline
no control starts. The walk itself (launch, record, stop policy) is the campaign driver's
(`harness.driver`); this module is the journal's side of it. At the end the caller's
`summarize` writes the morning summary into the night folder.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.base.atomic import write_json
from harness.base.errors import HarnessError, InvalidInput
from harness.base.hashing import sha256_many
from harness.base.signals import Interrupted, signals_interrupt
from harness.base.timeutil import iso, stamp, utc_now
from harness.config.executor import Executor
from harness.config.loader import Loaded
from harness.config.samehost import instances
from harness.driver.drive import drive
from harness.driver.local import LocalExecutor
from harness.driver.night import rules
from harness.driver.night.folders import night_folders, night_name
from harness.driver.night.journal import JOURNAL_NAME, Journal, RetryPolicy, Row
from harness.driver.night.nightlock import NightLock
from harness.driver.night.recover import seal_cut_off, stop_run_containers
from harness.driver.night.remote import Fetch, resume_rows, slurm_executor
from harness.driver.night.source import JournalSource, left_running
from harness.driver.plan import Outcome
from harness.driver.slurm import SlurmExecutor
from harness.driver.window import drive_window
from harness.judge.doctor import run_checks
from harness.judge.doctor.checks import GIB
from harness.measure.seal import seal_digest, source_files
from harness.measure.ui import Reporter

ENDED = "ended.json"
Summarize = Callable[[Path], list[Path]]


@dataclass
class NightResult:
    night_dir: Path
    exit_code: int
    runs: list[tuple[str, Path]] = field(default_factory=list)
    summary: list[Path] = field(default_factory=list)
    why: str = "done"


def policy_of(loaded: Loaded) -> RetryPolicy:
    return RetryPolicy.extra(loaded.campaign.retry.interrupted)


def inputs_seal(loaded: Loaded) -> str:
    """A digest of the campaign's own inputs (campaign, controls, images.lock), not of the
    harness code: a fixed harness may resume a night, changed controls may not."""
    labelled = {k: p for k, p in source_files(loaded.project_dir, loaded.files()).items()
                if k.startswith("input")}
    digests = sha256_many(labelled.values(), follow_symlinks=True)  # operator's own files
    return seal_digest({k: digests[p] for k, p in labelled.items()})


def _hint(e: HarnessError, night_dir: Path) -> HarnessError:
    e.message += (f" (night {night_dir}; start with --new to leave it as it is and begin a "
                  "new night)")
    return e


def open_journal(night_dir: Path, loaded: Loaded, deadline: str | None) -> Journal:
    try:
        return Journal.open_or_create(
            night_dir / JOURNAL_NAME, campaign=loaded.campaign.name,
            campaign_file=str(loaded.campaign_file), plan=loaded.plan(),
            seal=inputs_seal(loaded), deadline=deadline)
    except HarnessError as e:
        raise _hint(e, night_dir) from None


def find_night(nights_dir: Path, loaded: Loaded, night: str | None, new: bool) -> Path | None:
    """The night to continue: the one named, else the campaign's latest if unfinished."""
    if night is not None:
        path = Path(night) if ("/" in night or Path(night).is_dir()) else nights_dir / night
        if not (path / JOURNAL_NAME).is_file():
            raise InvalidInput(f"--night {night}: no {JOURNAL_NAME} in {path}")
        return path
    if new:
        return None
    folders = [p for p in night_folders(nights_dir, loaded.campaign.name)
               if (p / JOURNAL_NAME).exists()]
    if not folders:
        return None
    latest = folders[-1]
    try:
        with Journal.open(latest / JOURNAL_NAME) as journal:
            rows = journal.rows()
    except HarnessError as e:
        raise _hint(e, latest) from None
    ended = (latest / ENDED).exists()
    return latest if rules.unfinished(rows, policy_of(loaded), ended=ended) else None


def new_night_dir(nights_dir: Path, campaign: str) -> Path:
    nights_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        path = nights_dir / night_name(campaign, stamp())
        try:
            path.mkdir()
            return path
        except FileExistsError:
            time.sleep(1.0)
    raise InvalidInput(f"cannot create a new night folder under {nights_dir}")


class Night:
    """One invocation of a night: holds the night lock, the journal and the reporter."""

    def __init__(self, loaded: Loaded, runs_dir: Path, ui: Reporter, *,
                 lock_timeout: float | None, deadline: datetime | None,
                 summarize: Summarize | None = None, executor: Executor | None = None,
                 fetch: Fetch | None = None) -> None:
        self.loaded = loaded
        self.executor = executor or loaded.executor  # local, or slurm (harness/driver/night/remote)
        self.night_dir: Path | None = None
        self.runs_dir = Path(os.path.abspath(runs_dir))
        self.ui = ui
        self.lock_timeout = lock_timeout
        self.deadline = deadline
        self.policy = policy_of(loaded)
        self.instances = instances(loaded.plan(), loaded.same_host)  # same_host groups
        self.summarize = summarize
        self.fetch = fetch  # Slurm: a run sealed on a host's disk comes home from the drop
        self.result: NightResult | None = None

    @property
    def slurm(self) -> bool:
        return self.executor.kind == "slurm"

    def recover(self, journal: Journal) -> None:
        """Rows a dead harness left `running`: stop their container, seal, record. Under
        Slurm first follow the row's job (no second job is ever sent for it); the rows of
        a same_host group's instance left running share one job and are followed together."""
        done: set[int] = set()
        for row in journal.rows():
            if row.state != "running" or row.id in done:
                continue
            rows = [row]
            if self.slurm:
                rows = left_running(row, journal.rows(), self.instances)
                done.update(r.id for r in rows)
                executor = self.remote(JournalSource(self, journal))
                rows = [r for r, outcome in resume_rows(executor, journal, rows)
                        if not self.resumed(journal, r, outcome)]
            for r in rows:
                self.seal_left(journal, r)
        journal.resume()  # deferred rows go back to planned: the host may be repaired

    def resumed(self, journal: Journal, row: Row, outcome: Outcome | None) -> bool:
        """Record what following a dead controller's job gave for `row`; False when the
        row is left to `seal_left` (a folder its job left cut off)."""
        if outcome is not None:
            journal.finish(row, outcome.status, outcome.reason_text)
            return True
        if row.run_dir and not Path(row.run_dir).exists():  # no job, no folder
            journal.withdraw(row, "not run: the controller stopped before its job was "
                             "submitted")
            self.ui.event("not-run", control=row.control, run_id=row.run_id)
            return True
        return False

    def seal_left(self, journal: Journal, row: Row) -> None:
        """Stop the container of a run a dead harness left, seal its folder as found."""
        control, _ = self.loaded.controls.get(row.control, (None, None))
        notes = stop_run_containers(row.run_id, control.stop_grace if control else 10.0) \
            if row.run_id else []
        run_dir = Path(row.run_dir) if row.run_dir else self.runs_dir / "-missing-"
        status, reasons = seal_cut_off(run_dir, notes)
        journal.finish(row, status, rules.reason_text(reasons))
        self.ui.event("recovered", run_id=row.run_id, status=status, dir=str(run_dir),
                      notes=notes)

    def doctor(self, row: Row) -> list[str]:
        """The doctor's failing lines for this control's profile (empty: the host is fit).
        Under Slurm each host is its own doctor (HealthCheckProgram), not the controller."""
        if self.slurm:
            return []
        control, _ = self.loaded.controls[row.control]
        lock = self.loaded.image_lock
        pinned = lock.images.get(control.image) if lock else None
        images = {control.image: pinned.model_dump()} if pinned else None
        fail_bytes = int(self.loaded.campaign.host.min_free_gib * GIB)
        checks = run_checks(lock_path=self.loaded.lock_path, runs_dir=self.runs_dir,
                            images=images, profile=control.device,
                            required_gfx=self.loaded.campaign.host.gfx,
                            fail_free_bytes=fail_bytes,
                            warn_free_bytes=max(10 * GIB, fail_bytes))
        return [f"{c.name}: {c.detail}" for c in checks if c.status == "fail"]

    def loop(self, journal: Journal) -> str:
        """Run until done; return why the night stopped: done, deadline, stop-policy,
        interrupted or environment."""
        source = JournalSource(self, journal)
        policy = self.loaded.campaign.stop_policy
        on_outcome = lambda o: self.result.runs.append((o.status, o.run_dir))  # noqa: E731
        if self.slurm:  # up to `window` jobs at once, one batched query per cycle
            return drive_window(source, self.remote(source), window=self.executor.window,
                                stop_policy=policy, ui=self.ui, on_outcome=on_outcome).why
        executor = LocalExecutor(self.loaded, self.ui, lock_timeout=self.lock_timeout)
        return drive(source, executor, stop_policy=policy, ui=self.ui, raise_errors=False,
                     on_outcome=on_outcome).why

    def remote(self, source: JournalSource) -> SlurmExecutor:
        return slurm_executor(self.loaded, self.executor, self.ui, night_dir=self.night_dir,
                              runs_dir=self.runs_dir, lock_timeout=self.lock_timeout,
                              until=self.deadline, on_submitted=source.submitted,
                              fetch=self.fetch)

    def run(self, night_dir: Path, resumed: bool, lock: NightLock) -> NightResult:
        self.night_dir = night_dir
        deadline = iso(self.deadline) if self.deadline else None
        self.result = NightResult(night_dir, 1)
        journal = open_journal(night_dir, self.loaded, deadline)
        lock.describe_as(night_dir=str(night_dir))
        try:
            with signals_interrupt():
                self.ui.event("night-start", campaign=self.loaded.campaign.name,
                              dir=str(night_dir), resumed=resumed, deadline=deadline)
                try:
                    self.recover(journal)
                    why = self.loop(journal)
                except Interrupted as e:
                    self.ui.event("interrupted", signal=str(e))
                    why = "interrupted"
            rows = journal.rows()
        except BaseException:
            journal.close()
            self.summary(night_dir)  # recovered or finished rows changed: the report says so
            raise
        finally:
            journal.close()
        if why in ("done", "deadline", "stop-policy"):
            with contextlib.suppress(FileExistsError):
                write_json(night_dir / ENDED, {"at": utc_now(), "why": why}, exclusive=True)
        self.result.why = why
        self.result.exit_code = rules.night_exit_code(rows)
        if why == "interrupted":
            self.result.exit_code = max(self.result.exit_code, 1)
        self.result.summary = self.summary(night_dir)
        self.ui.event("night-end", why=why, exit_code=self.result.exit_code,
                      progress=rules.progress(rows, self.policy))
        return self.result

    def summary(self, night_dir: Path) -> list[Path]:
        """The caller's morning summary of the night; a failure is an event, not an error."""
        if self.summarize is None:
            return []
        try:
            return self.summarize(night_dir)
        except (HarnessError, OSError, ValueError) as e:
            self.ui.event("summary-failed", error=f"{type(e).__name__}: {e}")
            return []


def run_night(loaded: Loaded, *, runs_dir: Path, ui: Reporter, until: str | None = None,
              max_hours: float | None = None, night: str | None = None, new: bool = False,
              lock_timeout: float | None = None, window: str | None = None,
              summarize: Summarize | None = None,
              executor: Executor | None = None, fetch: Fetch | None = None) -> NightResult:
    """Take the night lock, pick or create the night folder, run it; `summarize(night_dir)`
    writes the morning summary at the end (the caller's: night/ knows no report). A start
    outside `window` is refused before anything is touched."""
    if night is not None and new:
        raise InvalidInput("--night and --new exclude each other")
    deadline = rules.night_deadline(datetime.now().astimezone(), until, max_hours, window)
    lock = NightLock(loaded.lock_path, kind="night", campaign=loaded.campaign.name)
    lock.acquire(timeout=lock_timeout or loaded.campaign.lock_timeout, on_wait=ui.waiting)
    try:
        nights_dir = Path(os.path.abspath(runs_dir)) / "nights"
        found = find_night(nights_dir, loaded, night, new)
        night_dir = found or new_night_dir(nights_dir, loaded.campaign.name)
        runner = Night(loaded, runs_dir, ui, lock_timeout=lock_timeout,
                       deadline=deadline.astimezone(UTC) if deadline else None,
                       summarize=summarize, executor=executor, fetch=fetch)
        return runner.run(night_dir, found is not None, lock)
    finally:
        lock.release()

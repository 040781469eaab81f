"""The night: resume or start a night, then walk its controls with the one campaign loop.
The journal commits each state change before the action; a host the executor finds unfit
defers the control; past the deadline no control starts."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.base.atomic import write_json
from harness.base.errors import REFUSED, HarnessError, InvalidInput
from harness.base.hashing import sha256_many
from harness.base.signals import Interrupted, exit_code, received, signals_interrupt
from harness.base.slots import NotExecuted
from harness.base.states import State, Status
from harness.base.timeutil import iso, stamp, utc_now
from harness.config.executor import ExecutorConfig
from harness.config.loader import Loaded
from harness.config.samehost import instances
from harness.driver.cutoff import seal_left
from harness.driver.drive import Driven, drive
from harness.driver.night import confirm, rules
from harness.driver.night.executors import Fetch, night_executor
from harness.driver.night.nightlock import NightLock
from harness.driver.night.source import JournalSource, left_running
from harness.driver.plan import LaunchRequest, NightExecutor, Outcome
from harness.driver.policy import ENDED_ON_PURPOSE, RetryPolicy, Why, not_executed
from harness.measure.nightfolder.journal import Journal, settle
from harness.measure.nightfolder.naming import (
    ENDED,
    JOURNAL_NAME,
    NIGHTS,
    night_folders,
    night_name,
)
from harness.measure.nightfolder.progress import progress
from harness.measure.nightfolder.rows import Row, latest_attempts
from harness.measure.seal import seal_digest, source_files
from harness.measure.ui import Reporter

Summarize = Callable[[Path], list[Path]]


@dataclass
class NightResult:
    night_dir: Path
    exit_code: int
    runs: list[tuple[Status, Path]] = field(default_factory=list)
    summary: list[Path] = field(default_factory=list)
    why: Why | str = Why.DONE
    not_executed: tuple[NotExecuted, ...] = ()  # slots the walk left unrun, with why
    signal: str | None = None  # the stop signal that interrupted it
    resumable: bool = False  # starting the night again continues it
    retried: frozenset[str] = frozenset()  # interrupted runs a resume retries


def rewrite_summary(night: Path, summarize: Summarize | None, ui: Reporter) -> list[Path]:
    """The caller's morning summary of the night (night/ knows no report); a failure is an
    event: the night, or a rerun, stands."""
    if summarize is None:
        return []
    try:
        return summarize(night)
    except (HarnessError, OSError, ValueError) as e:
        ui.event("summary-failed", night=str(night), error=f"{type(e).__name__}: {e}")
        return []


def policy_of(loaded: Loaded) -> RetryPolicy:
    return RetryPolicy.extra(loaded.campaign.retry.interrupted)


def inputs_seal(loaded: Loaded) -> str:
    """A digest of the campaign's inputs, not the harness's code: a fixed harness may resume."""
    labelled = {k: p for k, p in source_files(loaded.project_dir, loaded.files()).items()
                if k.startswith("input")}
    digests = sha256_many(labelled.values(), follow_symlinks=True)  # operator's own files
    return seal_digest({k: digests[p] for k, p in labelled.items()})


@contextlib.contextmanager
def hinted(night_dir: Path) -> Iterator[None]:
    """A refusal of the night's journal names the night, and how to leave it be."""
    try:
        yield
    except HarnessError as e:
        e.message += (f" (night {night_dir}; start with --new to leave it as it is and begin "
                      "a new night)")
        raise e from None


def open_journal(night_dir: Path, loaded: Loaded, deadline: str | None) -> Journal:
    with hinted(night_dir):
        return Journal.open_or_create(
            night_dir / JOURNAL_NAME, campaign=loaded.campaign.name,
            campaign_file=str(loaded.campaign_file), plan=loaded.plan(),
            seal=inputs_seal(loaded), deadline=deadline)


def _journal_rows(night_dir: Path) -> list:
    """Read-only: finding the night writes nothing (a dry run finds it so too)."""
    with hinted(night_dir), Journal.open(night_dir / JOURNAL_NAME, readonly=True) as journal:
        return journal.rows()


def find_night(nights_dir: Path, loaded: Loaded, night: str | None, new: bool,
               ) -> Path | None:
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
    rows = _journal_rows(latest)
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


class NightRunner:
    """One invocation of a night: the night lock, the journal, the reporter, and the
    executor that answers what differs between hosts and clusters."""

    def __init__(self, loaded: Loaded, runs_dir: Path, ui: Reporter, *,
                 lock_timeout: float | None, deadline: datetime | None,
                 summarize: Summarize | None = None, config: ExecutorConfig | None = None,
                 fetch: Fetch | None = None, deadline_named: str | None = None) -> None:
        self.loaded = loaded
        self.config = config or loaded.executor  # the campaign's `executor:`, command line on top
        self.executor: NightExecutor | None = None  # made once the night folder is known
        self.night_dir: Path | None = None
        self.runs_dir = Path(os.path.abspath(runs_dir))
        self.ui = ui
        self.lock_timeout = lock_timeout
        self.deadline = deadline
        self.deadline_named = deadline_named  # what set it: `--until 06:30`, `window …`
        self.policy = policy_of(loaded)
        self.instances = instances(loaded.plan(), loaded.same_host)  # same_host groups
        self.summarize = summarize
        self.fetch = fetch  # Slurm: a run sealed on a host's disk comes home from the drop
        self.result: NightResult | None = None

    def recover(self, journal: Journal) -> None:
        """Rows a dead harness left `running`, as the executor says what became of each (a
        same_host instance's rows together); deferred rows go back to planned."""
        done: set[int] = set()
        for row in journal.rows():
            if row.state != State.RUNNING or row.id in done:
                continue
            rows = left_running(row, journal.rows(), self.instances)
            done.update(r.id for r in rows)
            for r, outcome in self.left_behind(journal, rows):
                if outcome is not None:
                    journal.finish(r, outcome.status, outcome.reasons)
                else:  # no job, no folder: it never ran
                    journal.withdraw(r, "not run: the controller stopped before its job was "
                                     "submitted")
                    self.ui.event("not-run", control=r.control, run_id=r.run_id)
        journal.resume()  # deferred rows go back to planned: the host may be repaired

    def left_behind(self, journal: Journal, rows: list[Row],
                    ) -> list[tuple[Row, Outcome | None]]:
        """What became of rows left `running`; a row naming no folder is sealed as found."""
        named = [r for r in rows if r.run_dir]
        found: dict[str, Outcome | None] = {}
        if named:
            assert self.executor is not None
            job_id = next((j for r in named if (j := journal.job_of(r.id)) is not None), None)
            requests = tuple(LaunchRequest(r.control, Path(str(r.run_dir)), attempt=r.attempt,
                                           plan_index=r.plan_index) for r in named)
            found = {q.run_id: o for q, o in self.executor.recover(requests, job_id)}
        nowhere = LaunchRequest(rows[0].control, self.runs_dir / "-missing-")
        return [(r, found.get(Path(r.run_dir).name) if r.run_dir else
                 seal_left(nowhere, 0.0, self.ui, stop_containers=False)) for r in rows]

    def doctor(self, row: Row) -> list[str]:
        """What the executor finds wrong with the host for this control (empty: fit)."""
        assert self.executor is not None
        return self.executor.preflight(row.control, self.runs_dir)

    def loop(self, source: JournalSource) -> Driven:
        """Run until done; how the walk ended and what it left unrun."""
        assert self.executor is not None and self.result is not None
        runs = self.result.runs

        def on_outcome(outcome: Outcome) -> None:
            runs.append((outcome.status, outcome.run_dir))
            self.regression(source.journal, outcome)

        return drive(source, self.executor, stop_policy=self.loaded.campaign.stop_policy,
                     ui=self.ui, on_outcome=on_outcome, deadline=self.deadline_named)

    def regression(self, journal: Journal, outcome: Outcome) -> None:
        """The run's regression call and its confirmation rerun when due (`night.confirm`); a
        call that cannot be made is an event, never a change to the night."""
        if not outcome.run_dir.is_dir():  # a Slurm run kept on its host's disk: not home yet
            return
        try:
            confirm.after_outcome(self, journal, outcome)
        except (HarnessError, OSError, ValueError) as e:
            self.ui.event("regression-failed", run_id=outcome.run_dir.name,
                          error=f"{type(e).__name__}: {e}")

    def run(self, night_dir: Path, resumed: bool, lock: NightLock) -> NightResult:
        self.night_dir = night_dir
        deadline = iso(self.deadline) if self.deadline else None
        self.result = NightResult(night_dir, REFUSED)
        journal = open_journal(night_dir, self.loaded, deadline)
        lock.describe_as(night_dir=str(night_dir))
        source = JournalSource(self, journal)
        try:
            self.executor = night_executor(
                self.loaded, self.config, self.ui, night_dir=night_dir, runs_dir=self.runs_dir,
                lock_timeout=self.lock_timeout, until=self.deadline,
                on_submitted=source.submitted, fetch=self.fetch)
            driven = self.walk(journal, source, resumed)
            self.leave(journal, driven.not_executed)
            rows = journal.rows()
        except BaseException:
            journal.close()
            self.summary(night_dir)  # recovered or finished rows changed: the report says so
            raise
        finally:
            journal.close()
        self.result.not_executed = driven.not_executed
        return self.end(night_dir, driven.why, rows)

    def leave(self, journal: Journal, left: tuple[NotExecuted, ...]) -> None:
        """Each planned row the walk left unrun keeps why (its reason), for the summary."""
        latest = latest_attempts(journal.rows())
        for n in left:
            row = latest.get(n.slot.plan_index)
            if row is not None and row.state == State.PLANNED:
                journal.leave(row, n.why)
            self.ui.event("not-executed", control=n.slot.control,
                          repeat_index=n.slot.repeat_index, why=n.why)

    def walk(self, journal: Journal, source: JournalSource, resumed: bool) -> Driven:
        """Recover what a dead harness left, then the loop; a signal stops it interrupted."""
        with signals_interrupt():
            self.ui.event("night-start", campaign=self.loaded.campaign.name,
                          dir=str(self.night_dir), resumed=resumed,
                          deadline=iso(self.deadline) if self.deadline else None)
            try:
                self.recover(journal)
                if resumed:
                    self.say_skipped(journal.rows())
                for row in confirm.uncalled_rows(journal.rows(), self.runs_dir):  # a crash missed
                    self.regression(journal, Outcome.of(Path(str(row.run_dir)), row.state))
                return self.loop(source)
            except Interrupted as e:
                self.ui.event("interrupted", signal=str(e))
                why = Why.INTERRUPTED
                return Driven(why, not_executed=not_executed(
                    source.left(), why, self.loaded.campaign.stop_policy))

    def say_skipped(self, rows: list[Row]) -> None:
        """One line for each slot a resume skips because its retries are spent."""
        retries = self.policy.max_attempts - 1
        for r in rules.spent(rows, self.policy):
            self.ui.event("skipped", control=r.control, why=(
                f"attempt {r.attempt} (run {r.run_id}) was interrupted and the campaign's "
                f"retry.interrupted allows {retries} retr{'y' if retries == 1 else 'ies'}; "
                "`harness rerun --failed` runs it again"))

    def end(self, night_dir: Path, why: Why | str, rows: list[Row]) -> NightResult:
        """Mark a night that ended on purpose, its exit code, the morning summary."""
        assert self.result is not None
        if why in ENDED_ON_PURPOSE:
            with contextlib.suppress(FileExistsError):
                write_json(night_dir / ENDED, {"at": utc_now(), "why": why}, exclusive=True)
        self.result.why = why
        self.result.exit_code = rules.night_exit_code(rows)
        if why == Why.INTERRUPTED:
            self.result.exit_code = max(self.result.exit_code, REFUSED)
        self.result.exit_code = exit_code(self.result.exit_code)  # 130 after a Ctrl-C
        self.result.signal = received() if why == Why.INTERRUPTED else None
        self.result.resumable = why not in ENDED_ON_PURPOSE and rules.unfinished(
            rows, self.policy, ended=False)
        self.result.retried = rules.retried(rows, self.policy)
        self.result.summary = self.summary(night_dir)
        settle(night_dir / JOURNAL_NAME)  # the summary was the last reader: only the file stays
        self.ui.event("night-end", why=why, exit_code=self.result.exit_code,
                      progress=progress(rows))
        return self.result

    def summary(self, night_dir: Path) -> list[Path]:
        if self.summarize is not None:
            self.ui.event("summary-start", dir=str(night_dir))  # rendering takes seconds
        return rewrite_summary(night_dir, self.summarize, self.ui)


def run_night(loaded: Loaded, *, runs_dir: Path, ui: Reporter, until: str | None = None,
              max_hours: float | None = None, night: str | None = None, new: bool = False,
              lock_timeout: float | None = None, window: str | None = None,
              summarize: Summarize | None = None,
              executor: ExecutorConfig | None = None, fetch: Fetch | None = None,
              wait: float = 0.0) -> NightResult:
    """Take the night lock (waiting up to `wait` seconds for another night, never past this
    night's deadline), pick or create the night folder, run it; `summarize(night_dir)`
    writes the morning summary. A start outside `window` is refused before anything."""
    if night is not None and new:
        raise InvalidInput("--night and --new exclude each other")
    now = datetime.now().astimezone()
    deadline = rules.night_deadline(now, until, max_hours, window)
    lock = NightLock(loaded.lock_path, kind="night", campaign=loaded.campaign.name)
    if deadline is not None:
        wait = min(wait, max(0.0, (deadline - now).total_seconds()))
    lock.acquire(timeout=lock_timeout or loaded.campaign.lock_timeout, on_wait=ui.waiting,
                 wait=wait, on_night=lambda holder, waited: ui.event(
                     "night-lock-wait", holder=holder, waited_s=round(waited), wait_s=wait))
    try:
        nights_dir = Path(os.path.abspath(runs_dir)) / NIGHTS
        found = find_night(nights_dir, loaded, night, new)
        night_dir = found or new_night_dir(nights_dir, loaded.campaign.name)
        runner = NightRunner(loaded, runs_dir, ui, lock_timeout=lock_timeout,
                             deadline=deadline.astimezone(UTC) if deadline else None,
                             summarize=summarize, config=executor, fetch=fetch,
                             deadline_named=rules.deadline_named(now, until, max_hours, window))
        return runner.run(night_dir, found is not None, lock)
    finally:
        lock.release()

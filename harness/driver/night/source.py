"""The night's plan as the driver walks it: the journal says what runs next, and records
each launch (committed before it happens) and each outcome. A `same_host` group's launch
is its instance's unfinished members, in order (one Slurm job where `together`); a slot
with a member in flight is busy as a whole, so no member runs beside its partners."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from harness.base.catalogue import ENV_DOCTOR
from harness.base.errors import InvalidInput
from harness.base.reason import Reason
from harness.base.slots import Slot
from harness.base.states import State
from harness.base.timeutil import iso
from harness.driver.night import rules
from harness.driver.plan import LaunchRequest, Outcome, new_request
from harness.driver.policy import RetryPolicy, Why
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.progress import progress
from harness.measure.nightfolder.rows import RERUN, RETRY, Row, latest_attempts
from harness.measure.runfolder.reruns import append_index, index_entry
from harness.measure.ui import Reporter


class NightSide(Protocol):
    """What the source needs of the night (harness.driver.night.runner.NightRunner)."""

    ui: Reporter
    policy: RetryPolicy
    deadline: datetime | None
    runs_dir: Path
    instances: Mapping[int, tuple[int, ...]]  # plan slot -> its same_host instance's slots

    def doctor(self, row: Row) -> list[str]: ...


def group_busy(busy: frozenset[int], instances: Mapping[int, tuple[int, ...]]) -> frozenset[int]:
    """`busy` grown to whole same_host instances: a partner of a slot in flight waits. Pure."""
    return busy | {s for b in busy for s in instances.get(b, ())}


def group_rows(row: Row, rows: Sequence[Row],
               instances: Mapping[int, tuple[int, ...]]) -> list[Row]:
    """Pure: `row`'s instance's members whose newest attempt is planned, in order."""
    slots = instances.get(row.plan_index)
    if not slots:
        return [row]
    latest = latest_attempts(rows)
    return [latest[s] for s in slots if s in latest and latest[s].state == State.PLANNED]


def left_running(row: Row, rows: Sequence[Row],
                 instances: Mapping[int, tuple[int, ...]]) -> list[Row]:
    """The rows a dead controller left `running` in the one job of `row` (its same_host
    instance's, in order); `[row]` outside a group. Pure."""
    slots = instances.get(row.plan_index)
    if not slots:
        return [row]
    running = {r.plan_index: r for r in rows if r.state == State.RUNNING}
    return [running[s] for s in slots if s in running]


class JournalSource:
    """The night's plan, walked by the one campaign loop (`harness.driver.drive`)."""

    def __init__(self, night: NightSide, journal: Journal) -> None:
        self.night = night
        self.journal = journal
        self.deferred_now: set[int] = set()
        self._rows: dict[str, Row] = {}  # run id -> its journal row, while it runs
        self._queue: list[int] = []  # one host: a group's next members' slots, in order

    def next_launches(self, busy: frozenset[int] = frozenset(), *, together: bool = False,
                      ) -> tuple[LaunchRequest, ...] | str:
        """The next launch (one row, or a same_host group's unfinished members in order), or
        why the night ends. `busy`: slots in flight, left alone with their whole group."""
        found = self._next(group_busy(busy, self.night.instances))
        if isinstance(found, str):
            return found
        if together:
            return tuple(self._request(r) for r in found)
        self._queue = [r.plan_index for r in found[1:]]
        return (self._request(found[0]),)

    def _queued(self, rows: list[Row]) -> Row | None:
        """The next member of a group a one-host walk is in the middle of, if still planned."""
        latest = latest_attempts(rows)
        while self._queue:
            slot = self._queue.pop(0)
            if slot in latest and latest[slot].state == State.PLANNED:
                return latest[slot]
        return None

    def _next(self, busy: frozenset[int]) -> list[Row] | Why:
        """The rows of the next launch, after the bookkeeping before it; or why it ends."""
        night, journal = self.night, self.journal
        while True:
            rows = [r for r in journal.rows() if r.plan_index not in busy]
            p = progress(rows)
            if hasattr(night.ui, "set_progress"):
                night.ui.set_progress(p["done"], p["total"])
            step = rules.next_step(rows, night.policy)
            if step.kind in ("interrupt", "retry"):
                journal.apply(step)
                continue
            if step.kind == "done":
                return Why.ENVIRONMENT if self.deferred_now else Why.DONE
            queued = self._queued(rows)
            group = [queued] if queued else group_rows(step.row, rows, night.instances)
            if rules.past(night.deadline, datetime.now(UTC)):
                night.ui.event("deadline", deadline=iso(night.deadline),
                               left=sum(r.state == State.PLANNED for r in rows))
                return Why.DEADLINE
            failing = night.doctor(group[0])
            if failing:
                journal.mark_deferred(group[0], Reason(ENV_DOCTOR, "; ".join(failing)))
                self.deferred_now.add(group[0].id)
                night.ui.event("deferred", control=group[0].control, reasons=failing)
                continue
            return group

    def _request(self, row: Row) -> LaunchRequest:
        night = self.night
        night.ui.event("control-start", control=row.control, attempt=row.attempt,
                       plan_index=row.plan_index)
        request = new_request(row.control, night.runs_dir, attempt=row.attempt,
                              plan_index=row.plan_index, rerun_of=self._link(row))
        self._rows[request.run_id] = row
        return request

    def _link(self, row: Row) -> dict | None:
        """A rerun's or retry's backward link to the attempt it repeats, as `harness rerun`
        records it (the reason says which), so `ls`, `show` and bundles link a night's retries
        as they link reruns; None for a planned row."""
        if row.origin not in (RERUN, RETRY) or row.rerun_of is None:
            return None
        original = self.journal.row(row.rerun_of)
        if not original.run_id or not original.run_dir:
            return None
        return {"run_id": original.run_id, "path": original.run_dir,
                "reason": row.link_reason or ""}

    def _index(self, request: LaunchRequest, status: str) -> None:
        """A rerun's forward link in the rerun index, as `harness rerun` appends it."""
        link = request.rerun_of
        if link is None:
            return
        night_dir = getattr(self.night, "night_dir", None)  # a test's side may lack it
        try:
            append_index(self.night.runs_dir, index_entry(link, request.run_id,
                                                          request.run_dir, night_dir, status))
        except InvalidInput as e:  # the journal and run.json still link both ways
            self.night.ui.event("rerun-index-failed", run_id=request.run_id, error=e.message)

    def started(self, request: LaunchRequest) -> None:
        row = self._rows[request.run_id]
        self._rows[request.run_id] = self.journal.mark_running(
            row, request.run_id, str(request.run_dir))  # committed before the folder exists
        self._index(request, State.RUNNING)

    def submitted(self, request: LaunchRequest, token: str, job_id: str) -> None:
        """A Slurm job now runs this launch: its id goes into the journal at once."""
        self._rows[request.run_id] = self.journal.record_job(
            self._rows[request.run_id], token, job_id)

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None:
        row = self._rows.pop(request.run_id)
        self.journal.finish(row, outcome.status, outcome.reasons)
        self._index(request, outcome.status)

    def past_deadline(self) -> bool:
        return rules.past(self.night.deadline, datetime.now(UTC))

    def left(self) -> tuple[Slot, ...]:
        """The slots whose newest attempt is planned (never started, or withdrawn)."""
        latest = latest_attempts(self.journal.rows())
        counts = Counter(r.control for r in latest.values())
        return tuple(Slot(i, r.control, r.repeat_index, counts[r.control] > 1)
                     for i, r in sorted(latest.items()) if r.state == State.PLANNED)

    def withdrawn(self, request: LaunchRequest, reason: str) -> None:
        """Its job was cancelled before it started: the row is planned again, not run."""
        row = self._rows.pop(request.run_id)
        self.journal.withdraw(row, f"{reason}; run {request.run_id} never started")
        self.night.ui.event("not-run", control=request.control, run_id=request.run_id)

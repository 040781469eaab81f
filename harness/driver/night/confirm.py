"""Confirm before alerting: each accepted run of a night gets its regression call
(`driver.regress`), sealed as its addendum, and a regression schedules one linked rerun of
its control, run after the planned ones. A regression is confirmed only when the rerun's
calls agree (`comparable.confirmation` says why one call is not enough). A call never
refuses a run or changes a status: a regression is a finding about figures, and a call
that cannot be made is an event, never an error of the night."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from harness.base.errors import HarnessError
from harness.base.states import State, Status
from harness.base.timeutil import parse_or_none
from harness.driver.plan import Outcome
from harness.driver.regress import Called, call_rerun, call_run, seal
from harness.judge.comparable import Confirmation, Unverified
from harness.judge.regressionfile import read_sealed
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.rows import RERUN, Row
from harness.measure.runfolder.runjson import read
from harness.measure.ui import Reporter

REASON = "confirm a regression call"  # the rerun's link reason begins so (for people)


class NightClock(Protocol):
    """What the confirmation needs of the night (harness.driver.night.runner.NightRunner)."""

    ui: Reporter
    deadline: datetime | None
    runs_dir: Path


def rerun_decision(row: Row, rows: Sequence[Row], regressions: Sequence[str], *,
                   deadline: datetime | None, now: datetime, needed_s: float,
                   ) -> tuple[bool, str]:
    """Pure: whether a regression gets its one confirmation rerun: never of a rerun, one per
    control per night, and only if the deadline leaves `needed_s` of room."""
    if not regressions:
        return False, "no regression called"
    if row.origin == RERUN:
        return False, "a rerun is never rerun to confirm it"
    if any(r.origin == RERUN and r.control == row.control for r in rows):
        return False, f"control {row.control} has had its one rerun of the night"
    if deadline is not None and now + timedelta(seconds=max(0.0, needed_s)) > deadline:
        return False, (f"the deadline leaves no room: about {needed_s:.0f} s of runs are "
                       "still to go")
    return True, f"{REASON} on {', '.join(regressions)}"


def needed_seconds(wall_s: float | None, rows: Sequence[Row]) -> float:
    """Pure: the room a rerun needs: its original's time, for it and each planned row."""
    planned = sum(r.state == State.PLANNED for r in rows)
    return (wall_s or 0.0) * (planned + 1)


def _wall_s(run_dir: Path) -> float | None:
    """How long the run took from its folder to its seal (None when unreadable)."""
    try:
        times = read(run_dir).times or {}
    except HarnessError:
        return None
    a, b = parse_or_none(times.get("created")), parse_or_none(times.get("sealed"))
    return (b - a).total_seconds() if a and b else None


def _schedule(night: NightClock, journal: Journal, row: Row, called: Called) -> dict:
    """Decide the rerun and add its journal row when due; what the addendum says of it."""
    rows = journal.rows()
    due, why = rerun_decision(row, rows, called.regressions, deadline=night.deadline,
                              now=datetime.now(UTC),
                              needed_s=needed_seconds(_wall_s(Path(str(row.run_dir))), rows))
    if due:
        added = journal.add_rerun(str(row.run_id), why)  # committed before anything runs
        night.ui.event("regression-rerun", run_id=row.run_id, control=row.control,
                       figures=called.regressions, attempt=added.attempt)
        return {"scheduled": True, "why": why, "attempt": added.attempt}
    if called.regressions:
        night.ui.event("regression-not-rerun", run_id=row.run_id, why=why)
    return {"scheduled": False, "why": why}


def after_outcome(night: NightClock, journal: Journal, outcome: Outcome) -> Path | None:
    """Call an accepted run and seal the call; schedule or weigh its rerun."""
    if outcome.status != Status.ACCEPTED:
        return None
    row = journal.by_run_id(outcome.run_dir.name)
    if row is None or not row.run_dir:
        return None
    original = journal.row(row.rerun_of) if row.rerun_of is not None else None
    here = outcome.run_dir  # the folder this harness just sealed, not the journal's word
    if row.origin == RERUN and original is not None and original.run_dir:
        called = call_rerun(here, Path(original.run_dir), night.runs_dir)
    else:
        called = call_run(here, night.runs_dir)
    if isinstance(called, Unverified):
        night.ui.event("regression-uncalled", run_id=called.run_id, why=called.why)
        return None
    rerun = None if row.origin == RERUN else _schedule(night, journal, row, called)
    folder = seal(called, here, datetime.now(UTC), rerun=rerun)
    night.ui.event("regression-call", run_id=row.run_id, regressions=called.said,
                   confirmed=sorted(f for f, c in called.confirmed.items()
                                    if c == Confirmation.CONFIRMED),
                   addendum=str(folder))
    return folder


def uncalled_rows(rows: Sequence[Row], runs_dir: Path) -> list[Row]:
    """The night's accepted rows whose folder (named for its run id, directly in `runs_dir`)
    holds no sealed call: a harness that died between seal and call left it."""
    runs = os.path.realpath(runs_dir)
    return [r for r in rows if r.state == State.ACCEPTED and r.run_id and r.run_dir
            and os.path.realpath(r.run_dir) == os.path.join(runs, r.run_id)
            and Path(r.run_dir).is_dir() and read_sealed(Path(r.run_dir)) is None]

"""Confirm before alerting, without Docker: the one rerun's decision and its place in the
journal's rules (pure), then a night's calls over real sealed folders and a real journal:
a slow run is called and its rerun scheduled, linked both ways, run after the planned
controls, and confirmed by a slow rerun or not by a normal one; summary.json lists only
the confirmed one, with both runs."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from regression_helpers import sealed_run

from harness.base.states import State, Status
from harness.driver.night.confirm import (
    after_outcome,
    needed_seconds,
    rerun_decision,
    uncalled_rows,
)
from harness.driver.night.rules import judged_attempts, next_step, night_exit_code
from harness.driver.night.source import JournalSource
from harness.driver.plan import Outcome
from harness.driver.policy import RetryPolicy
from harness.judge.regressionfile import read_sealed
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.nightfolder.rows import Row
from harness.measure.runfolder.manifest import verify_folder
from harness.measure.runfolder.reruns import reruns_of
from harness.measure.ui import Reporter
from harness.readers.report.regressions import regression_lines, regression_lists

NOW = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def row(i: int, state: str = State.ACCEPTED, *, plan: int | None = None, attempt: int = 1,
        origin: str = "plan", control: str | None = None, rerun_of: int | None = None) -> Row:
    return Row(id=i, plan_index=i if plan is None else plan, control=control or f"c{i}",
               repeat_index=0, attempt=attempt, state=state, run_id=f"r{i}", run_dir=None,
               reason=None, rerun_of=rerun_of, origin=origin, link_reason=None,
               updated="2026-12-01T00:00:00Z")


# ---- the decision ----------------------------------------------------------------------------


def decide(r: Row, rows: list[Row], regressions=("duration_s",), deadline=None, needed=60.0):
    return rerun_decision(r, rows, list(regressions), deadline=deadline, now=NOW,
                          needed_s=needed)


def test_a_regression_schedules_one_rerun() -> None:
    r = row(1)
    assert decide(r, [r]) == (True, "confirm a regression call on duration_s")


def test_no_regression_schedules_nothing() -> None:
    """Insufficient data, no change and an improvement are no regression: no rerun."""
    r = row(1)
    assert decide(r, [r], regressions=()) == (False, "no regression called")


def test_a_rerun_is_never_rerun() -> None:
    rerun = row(2, plan=1, attempt=2, origin="rerun", rerun_of=1)
    assert decide(rerun, [row(1), rerun]) == (False, "a rerun is never rerun to confirm it")


def test_one_rerun_per_control_per_night() -> None:
    first, second = row(1, control="c"), row(2, control="c")
    rerun = row(3, State.PLANNED, plan=1, attempt=2, origin="rerun", control="c", rerun_of=1)
    assert decide(second, [first, second, rerun]) == (
        False, "control c has had its one rerun of the night")
    other = row(4, control="d")
    assert decide(other, [first, second, rerun, other])[0]


def test_only_when_the_deadline_leaves_room() -> None:
    r = row(1)
    assert decide(r, [r], deadline=NOW + timedelta(seconds=59)) == (
        False, "the deadline leaves no room: about 60 s of runs are still to go")
    assert decide(r, [r], deadline=NOW + timedelta(seconds=61))[0]


def test_the_room_needed_counts_the_planned_runs_that_go_first() -> None:
    rows = [row(1), row(2, State.PLANNED), row(3, State.PLANNED), row(4, State.REFUSED)]
    assert needed_seconds(10.0, rows) == 30.0
    assert needed_seconds(None, rows) == 0.0


# ---- the journal's rules for the one rerun -------------------------------------------------


def test_a_rerun_runs_only_after_the_planned_controls() -> None:
    rows = [row(1, plan=0), row(2, State.PLANNED, plan=0, attempt=2, origin="rerun",
                                rerun_of=1),
            row(3, State.PLANNED, plan=1), row(4, State.PLANNED, plan=2)]
    assert next_step(rows, RetryPolicy(1)).row.id == 3
    rows[2] = row(3, plan=1)
    assert next_step(rows, RetryPolicy(1)).row.id == 4
    rows[3] = row(4, plan=2)
    assert next_step(rows, RetryPolicy(1)).row.id == 2  # only the rerun is left
    rows[1] = row(2, plan=0, attempt=2, origin="rerun", rerun_of=1)
    assert next_step(rows, RetryPolicy(1)).kind == "done"


def test_a_rerun_left_unrun_by_the_deadline_leaves_the_exit_code_alone() -> None:
    original = row(1)
    planned = row(2, State.PLANNED, plan=1, attempt=2, origin="rerun", rerun_of=1)
    assert judged_attempts([original, planned]) == {1: original}
    assert night_exit_code([original, planned]) == 0
    assert night_exit_code([original, row(2, State.REFUSED, plan=1, attempt=2,
                                          origin="rerun", rerun_of=1)]) == 1
    assert night_exit_code([row(1, State.PLANNED)]) == 1  # a planned control still counts


# ---- a night's calls over sealed folders and a real journal ----------------------------------


def night_of(tmp_path: Path, slots: int):
    journal = Journal.create(tmp_path / JOURNAL_NAME, campaign="camp", campaign_file="c.yaml",
                             plan=[("c", i) for i in range(slots)])
    out = io.StringIO()
    night = SimpleNamespace(policy=RetryPolicy(1), ui=Reporter(out), deadline=None,
                            doctor=lambda row: [], runs_dir=tmp_path / "runs", instances={},
                            night_dir=tmp_path)
    return JournalSource(night, journal), journal, night, out


def run_slot(source: JournalSource, journal: Journal, night, minute: int, duration: float):
    """The source's next launch, run as a sealed folder, recorded, then called."""
    [request] = source.next_launches()
    source.started(request)
    sealed_run(night.runs_dir, minute, duration=duration, folder=request.run_dir)
    outcome = Outcome.of(request.run_dir, Status.ACCEPTED)
    source.finished(request, outcome)
    after_outcome(night, journal, outcome)
    return request


@pytest.fixture
def baseline(tmp_path):
    runs = tmp_path / "runs"
    return [sealed_run(runs, i, duration=1.0 + (i % 5) / 100) for i in range(20)]


def test_a_slow_night_is_called_rerun_linked_and_confirmed(tmp_path, baseline) -> None:
    source, journal, night, events = night_of(tmp_path, 2)
    slow = run_slot(source, journal, night, 30, 2.0)
    first = read_sealed(slow.run_dir)
    assert first["regressions"] == ["duration_s", "lock_hold_s"]
    assert first["rerun"] == {"scheduled": True, "attempt": 2, "why":
                              "confirm a regression call on duration_s, lock_hold_s"}
    later = run_slot(source, journal, night, 31, 2.1)  # the planned slot runs first
    assert later.plan_index == 1 and later.rerun_of is None
    assert read_sealed(later.run_dir)["rerun"]["scheduled"] is False  # one per control
    rerun = run_slot(source, journal, night, 32, 2.05)
    assert rerun.rerun_of == {"run_id": slow.run_id, "path": str(slow.run_dir),
                              "reason": "confirm a regression call on duration_s, lock_hold_s"}
    assert source.next_launches() == "done"
    assert [r["run_id"] for r in reruns_of(slow.run_dir)] == [rerun.run_id]  # forward link
    [linked] = [r for r in journal.rows() if r.run_id == rerun.run_id]
    assert linked.origin == "rerun" and journal.row(linked.rerun_of).run_id == slow.run_id
    second = read_sealed(rerun.run_dir)
    assert [r["run_id"] for r in second["recent"]] == [slow.run_id, rerun.run_id]
    assert len(second["baseline"]) == 20  # the original's: the later slot is not in it
    assert second["confirms"]["run_id"] == slow.run_id
    assert second["confirms"]["figures"]["duration_s"]["confirmation"] == "confirmed"
    assert second["rerun"] is None
    for folder in (slow.run_dir, later.run_dir, rerun.run_dir):
        assert verify_folder(folder) == []
    records = [{"regression": read_sealed(r.run_dir)} for r in (slow, later, rerun)]
    confirmed, unconfirmed = regression_lists(records)
    # the lock is held for the run and more: one regression, its follower named on it
    assert [(c["figure"], c["run_id"], c["rerun_id"], c["moved_with"]) for c in confirmed] == [
        ("duration_s", slow.run_id, rerun.run_id, ["lock_hold_s"])]
    assert confirmed[0]["p_value"] == pytest.approx(1 / 231)
    assert confirmed[0]["alone"]["p_value"] == pytest.approx(1 / 21)
    assert [(u["run_id"], u["why"], u["moved_with"]) for u in unconfirmed] == [
        (later.run_id, "control c has had its one rerun of the night", ["lock_hold_s"])]
    assert night_exit_code(journal.rows()) == 0
    assert "regression-rerun" in events.getvalue()
    journal.close()


def test_a_one_off_slow_run_is_not_confirmed_by_a_normal_rerun(tmp_path, baseline) -> None:
    source, journal, night, _ = night_of(tmp_path, 1)
    slow = run_slot(source, journal, night, 30, 2.0)
    rerun = run_slot(source, journal, night, 31, 1.02)
    doc = read_sealed(rerun.run_dir)
    assert doc["regressions"] == []
    assert {f: v["confirmation"] for f, v in doc["confirms"]["figures"].items()} == {
        "duration_s": "unconfirmed", "lock_hold_s": "unconfirmed"}
    confirmed, unconfirmed = regression_lists(
        [{"regression": read_sealed(p)} for p in (slow.run_dir, rerun.run_dir)])
    assert confirmed == []
    assert [(u["figure"], u["run_id"], u["rerun_id"], u["moved_with"]) for u in unconfirmed] == [
        ("duration_s", slow.run_id, rerun.run_id, ["lock_hold_s"])]
    lines = regression_lines({"regressions": confirmed, "unconfirmed": unconfirmed})
    assert lines[0].startswith(f"one-off c duration_s: run {slow.run_id} was called +")
    assert f"its rerun {rerun.run_id} did not confirm it" in lines[0]
    assert lines[0].endswith("no alert")
    assert night_exit_code(journal.rows()) == 0
    journal.close()


def test_too_few_earlier_runs_call_nothing_and_schedule_nothing(tmp_path) -> None:
    runs = tmp_path / "runs"
    for i in range(5):
        sealed_run(runs, i)
    source, journal, night, _ = night_of(tmp_path, 1)
    slow = run_slot(source, journal, night, 30, 50.0)
    doc = read_sealed(slow.run_dir)
    assert doc["figures"]["duration_s"]["movement"] == "insufficient data"
    assert doc["rerun"] == {"scheduled": False, "why": "no regression called"}
    assert source.next_launches() == "done"
    assert regression_lists([{"regression": doc}]) == ([], [])
    journal.close()


def test_a_refused_run_is_not_called(tmp_path, baseline) -> None:
    _, journal, night, _ = night_of(tmp_path, 1)
    assert after_outcome(night, journal, Outcome.of(baseline[0], Status.REFUSED)) is None
    journal.close()


def test_a_confirmation_from_a_forged_addendum_is_not_read(tmp_path, baseline) -> None:
    """The summary reads an addendum only as its own SHA256SUMS vouches for it."""
    source, journal, night, _ = night_of(tmp_path, 1)
    slow = run_slot(source, journal, night, 30, 2.0)
    [folder] = (slow.run_dir / "addenda").iterdir()
    target = folder / "regression.json"
    folder.chmod(0o755)
    target.chmod(0o644)
    doc = json.loads(target.read_text())
    target.write_text(json.dumps({**doc, "regressions": []}))
    assert read_sealed(slow.run_dir) is None
    journal.close()


def test_the_call_uses_the_sealed_times(tmp_path, baseline) -> None:
    """A run sealed before every baseline run has no baseline: its call is insufficient."""
    source, journal, night, _ = night_of(tmp_path, 1)
    early = run_slot(source, journal, night, -10, 2.0)
    doc = read_sealed(early.run_dir)
    assert doc["baseline"] == [] and doc["not_comparable"] == 20
    assert doc["figures"]["duration_s"]["movement"] == "insufficient data"
    journal.close()


def test_a_resumed_night_calls_the_runs_a_crash_left_uncalled(tmp_path, baseline) -> None:
    source, journal, night, _ = night_of(tmp_path, 2)
    called = run_slot(source, journal, night, 30, 1.0)
    [request] = source.next_launches()  # sealed, recorded, and the harness died here
    source.started(request)
    sealed_run(night.runs_dir, 31, folder=request.run_dir)
    source.finished(request, Outcome.of(request.run_dir, Status.ACCEPTED))
    assert [r.run_id for r in uncalled_rows(journal.rows(), night.runs_dir)] == [
        request.run_id]
    assert uncalled_rows(journal.rows(), tmp_path) == []  # not a folder of that runs dir
    assert called.run_id not in [r.run_id for r in journal.rows() if r.run_id
                                 and read_sealed(Path(r.run_dir)) is None]
    journal.close()

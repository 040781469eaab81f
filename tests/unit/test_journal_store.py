"""The SQLite journal: WAL durability, resume after SIGKILL, refusal of foreign/corrupt files."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.base.errors import EnvironmentFault, InvalidInput
from harness.driver.night.rules import next_step
from harness.driver.policy import RetryPolicy
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.rows import chain_of
from harness.measure.nightfolder.transitions import IllegalTransition

PLAN = [("echo", 0), ("sleep", 0), ("echo", 1)]


def make(tmp_path: Path) -> Journal:
    return Journal.create(
        tmp_path / "journal.sqlite", campaign="rehearsal-night", campaign_file="c.yaml",
        plan=PLAN, seal="sha256:" + "a" * 64, deadline="2026-12-01T06:00:00Z",
    )


def test_create_plans_rows_and_uses_wal_full(tmp_path: Path) -> None:
    j = make(tmp_path)
    rows = j.rows()
    assert [(r.plan_index, r.control, r.repeat_index, r.state) for r in rows] == [
        (0, "echo", 0, "planned"), (1, "sleep", 0, "planned"), (2, "echo", 1, "planned"),
    ]
    assert j._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert j._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert j.night().campaign == "rehearsal-night"
    j.close()
    raw = sqlite3.connect(tmp_path / "journal.sqlite")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file
    raw.close()


def test_create_never_overwrites(tmp_path: Path) -> None:
    make(tmp_path).close()
    with pytest.raises(InvalidInput, match="never overwritten"):
        make(tmp_path)


def test_state_change_is_visible_to_another_connection_at_once(tmp_path: Path) -> None:
    j = make(tmp_path)
    first = j.rows()[0]
    j.mark_running(first, "rehearsal-echo-1", "/runs/rehearsal-echo-1")
    other = sqlite3.connect(tmp_path / "journal.sqlite")
    sql = "SELECT state, run_id FROM runs WHERE id = ?"
    state, run_id = other.execute(sql, (first.id,)).fetchone()
    assert (state, run_id) == ("running", "rehearsal-echo-1")
    other.close()
    j.close()


def test_stale_row_is_refused_compare_and_set(tmp_path: Path) -> None:
    j = make(tmp_path)
    first = j.rows()[0]
    j.mark_running(first, "r1", "/r1")
    with pytest.raises(IllegalTransition, match="another harness"):
        j.mark_running(first, "r1b", "/r1b")  # `first` still says planned
    assert j.row(first.id).run_id == "r1"
    with pytest.raises(IllegalTransition):
        j.mark_running(first.id, "r1c", "/r1c")  # running -> start is illegal
    j.close()


def test_full_night_and_events(tmp_path: Path) -> None:
    j = make(tmp_path)
    policy = RetryPolicy(1)
    outcomes = iter(["accept", "refuse", "time-out"])
    while (action := next_step(j.rows(), policy)).kind != "done":
        assert action.kind == "launch"
        row = j.mark_running(action.row, f"run-{action.row.plan_index}", "/x")
        outcome = next(outcomes)
        if outcome == "accept":
            j.finish(row, "accepted")
        elif outcome == "refuse":
            j.finish(row, "refused", "finalizer exited 1")
        else:
            j.finish(row, "timed-out", "RUN-TIMEOUT: container ran past 1m")
    assert [r.state for r in j.rows()] == ["accepted", "refused", "timed-out"]
    assert j.rows()[2].reason == "RUN-TIMEOUT: container ran past 1m"  # no status prefix
    assert j.rows()[1].reason == "finalizer exited 1"
    events = [(e["event"], e["to_state"]) for e in j.events(j.rows()[0].id)]
    assert events == [("plan", "planned"), ("start", "running"), ("accept", "accepted")]
    j.close()


def test_deferred_is_requeued_on_resume(tmp_path: Path) -> None:
    j = make(tmp_path)
    j.mark_deferred(j.rows()[0], "doctor: /dev/kfd missing")
    assert next_step(j.rows(), RetryPolicy(1)).row.plan_index == 1
    changed = j.resume()
    assert [(r.plan_index, r.state, r.reason) for r in changed] == [(0, "planned", None)]
    j.close()


CRASHER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from harness.measure.nightfolder.journal import Journal
    j = Journal.open(Path(sys.argv[1]))
    row = j.rows()[1]
    j.finish(j.mark_running(j.rows()[0], "run-0", "/r0"), "accepted")
    j.mark_running(row, "run-1", "/r1")
    print("launched", flush=True)
    time.sleep(60)
    """
)


def test_sigkill_mid_run_then_resume_sees_interrupted(tmp_path: Path) -> None:
    make(tmp_path).close()
    path = tmp_path / "journal.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHER, str(path)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert proc.stdout.readline().strip() == "launched"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    j = Journal.open(path)
    assert [r.state for r in j.rows()] == ["accepted", "running", "planned"]
    changed = j.resume()
    assert [(r.run_id, r.state) for r in changed] == [("run-1", "interrupted")]
    # no retries allowed: the accepted run is not repeated, the interrupted one is final
    action = next_step(j.rows(), RetryPolicy(1))
    assert (action.kind, action.row.plan_index) == ("launch", 2)
    # with a retry policy, the interrupted slot gets a new attempt linked to the old one
    retry = j.apply(next_step(j.rows(), RetryPolicy(2)))
    assert (retry.plan_index, retry.attempt, retry.origin) == (1, 2, "retry")
    assert retry.rerun_of == j.by_run_id("run-1").id
    assert next_step(j.rows(), RetryPolicy(2)).row.id == retry.id
    j.close()


def test_chain_links_both_ways(tmp_path: Path) -> None:
    j = make(tmp_path)
    r0 = j.mark_running(j.rows()[0], "orig", "/o")
    j.finish(r0, "refused", "startup/generation configuration differs")
    rerun = j.add_rerun("orig", "instrument repaired (#3059)")
    assert (rerun.rerun_of, rerun.attempt) == (r0.id, 2)
    assert rerun.link_reason == "instrument repaired (#3059)"
    j.finish(j.mark_running(rerun, "second", "/s"), "accepted")
    assert j.by_run_id("orig").state == "refused"  # the original stays refused
    for rid in ("orig", "second"):
        assert [r.run_id for r in chain_of(j.rows(), rid)] == ["orig", "second"]
    assert chain_of(j.rows(), "unknown") == []
    with pytest.raises(InvalidInput, match="reason"):
        j.add_rerun("orig", "  ")
    j.close()


def test_rerun_of_unfinished_run_is_refused(tmp_path: Path) -> None:
    j = make(tmp_path)
    j.mark_running(j.rows()[0], "busy", "/b")
    with pytest.raises(InvalidInput, match="only a finished run"):
        j.add_rerun("busy", "why not")
    j.close()


def test_open_or_create_resumes_same_night_and_refuses_another(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    kw = dict(campaign="n", campaign_file="c.yaml", plan=PLAN, seal="s1")
    Journal.open_or_create(path, **kw).close()
    Journal.open_or_create(path, **kw).close()
    with pytest.raises(InvalidInput) as info:
        Journal.open_or_create(path, **{**kw, "campaign": "other", "seal": "s2", "plan": PLAN[:1]})
    assert len(info.value.faults) == 3


def test_corrupt_file_is_a_clear_error_and_left_in_place(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    garbage = b"this is not sqlite at all\n" * 100
    path.write_bytes(garbage)
    with pytest.raises(EnvironmentFault, match=r"damaged or unreadable.*left untouched"):
        Journal.open(path)
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.sqlite"]


def test_truncated_journal_is_a_clear_error(tmp_path: Path) -> None:
    make(tmp_path).close()
    path = tmp_path / "journal.sqlite"
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\xff" * 50 + data[150:])  # damage the header page
    for readonly in (False, True):  # a read-only open checks on its one connection
        with pytest.raises((EnvironmentFault, InvalidInput)):
            Journal.open(path, readonly=readonly)
    assert path.exists()


def test_foreign_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(InvalidInput, match="not a harness night journal"):
            Journal.open(path, readonly=readonly)
    assert path.read_bytes() == before


def test_missing_journal(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no night journal"):
        Journal.open(tmp_path / "nope.sqlite")


def test_a_withdrawn_row_is_planned_again_without_its_run_and_launched_next(
        tmp_path: Path) -> None:
    """A Slurm job cancelled while pending never ran: the row is `planned` again (its run id
    and folder cleared, the reason and a `withdraw` event kept), and a later start runs it
    under a new run id."""
    j = make(tmp_path)
    row = j.mark_running(j.rows()[0], "run-0", "/runs/run-0")
    row = j.record_job(row, "harness+n+0+1+echo", "41")
    back = j.withdraw(row, "not run: its job was cancelled while pending (stop-policy)")
    assert (back.state, back.run_id, back.run_dir) == ("planned", None, None)
    assert back.reason.startswith("not run")
    assert [e["event"] for e in j.events(row.id)] == ["plan", "start", "slurm-job", "withdraw"]
    action = next_step(j.rows(), RetryPolicy(1))
    assert (action.kind, action.row.id) == ("launch", row.id)
    again = j.mark_running(action.row, "run-0b", "/runs/run-0b")
    assert (again.run_id, again.reason) == ("run-0b", None) and j.job_of(row.id) == "41"
    with pytest.raises(IllegalTransition):
        j.withdraw(j.finish(again, "accepted"), "too late")
    j.close()


def test_a_row_left_unrun_keeps_why_until_it_runs(tmp_path: Path) -> None:
    """The walk ended before a planned row: it stays planned with why as its reason (a
    `leave` event), a later start runs it and the reason is gone; a row that ran is not
    left."""
    j = make(tmp_path)
    row = j.leave(j.rows()[0], "deadline --until 06:30 reached")
    assert (row.state, row.reason) == ("planned", "deadline --until 06:30 reached")
    assert [e["event"] for e in j.events(row.id)][-1] == "leave"
    again = j.mark_running(row, "run-0", "/runs/run-0")
    assert again.reason is None
    with pytest.raises(IllegalTransition):
        j.leave(again, "interrupted")
    j.close()

"""Journals an older harness wrote are read as today's and migrated on a writable open, in
one transaction: version 1 (before the journal spoke the run's language: `sealed`,
time-outs as `failed` with a "timed-out: " reason) and version 2 (before a row kept its
outcome's rules and exit class beside the reason's text). The old files are built here
with raw SQL, as the old harnesses wrote them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness.base.errors import EnvironmentFault
from harness.driver.night.rules import next_step, night_exit_code
from harness.driver.policy import RetryPolicy
from harness.measure.nightfolder import schema
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.nightfolder.rows import chain_of
from harness.measure.nightfolder.schema import evidence_of, upgrade_event, upgrade_state

# Schema version 1, exactly as the journal (harness/measure/nightfolder/journal.py) created it.
V1_SCHEMA = """
PRAGMA application_id = 1213090353;
PRAGMA user_version = 1;
CREATE TABLE night (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    campaign TEXT NOT NULL,
    campaign_file TEXT NOT NULL,
    seal TEXT,
    created TEXT NOT NULL,
    deadline TEXT
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_index INTEGER NOT NULL,
    control TEXT NOT NULL,
    repeat_index INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('planned', 'running', 'sealed', 'refused', 'failed', \
'interrupted', 'deferred')),
    run_id TEXT UNIQUE,
    run_dir TEXT,
    reason TEXT,
    rerun_of INTEGER REFERENCES runs(id),
    origin TEXT NOT NULL CHECK (origin IN ('plan', 'retry', 'rerun')),
    link_reason TEXT,
    updated TEXT NOT NULL,
    UNIQUE (plan_index, attempt)
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run INTEGER NOT NULL REFERENCES runs(id),
    event TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    detail TEXT,
    at TEXT NOT NULL
);
"""
T = "2026-11-29T02:00:00Z"
# (plan_index, control, attempt, state, run_id, reason, rerun_of, origin, link_reason)
V1_ROWS = [
    (0, "kv", 1, "sealed", "kv-1", None, None, "plan", None),
    (1, "slow", 1, "failed", "slow-1", "timed-out: RUN-TIMEOUT: ran past 1m", None, "plan", None),
    (2, "boom", 1, "failed", "boom-1", "RUN-EXIT: the container exited 7", None, "plan", None),
    (3, "gate", 1, "refused", "gate-1", "POST-GATE: differs", None, "plan", None),
    (4, "cut", 1, "interrupted", "cut-1", "RUN-INTERRUPTED: SIGTERM", None, "plan", None),
    (4, "cut", 2, "sealed", "cut-2", None, 5, "retry", "retry after interrupted"),
    (5, "late", 1, "planned", None, None, None, "plan", None),
    (6, "sick", 1, "deferred", None, "ENV-DOCTOR: disk: full", None, "plan", None),
    (3, "gate", 2, "sealed", "gate-2", None, 4, "rerun", "reseated the card"),
]
FINISH = {"sealed": "seal", "failed": "fail", "refused": "refuse", "interrupted": "interrupt"}
V2_FINISH = {"accepted": "accept", "failed": "fail", "refused": "refuse",
             "interrupted": "interrupt", "timed-out": "time-out"}


# Schema version 2, exactly as the version-2 harness created it: today's states, and no
# rules or exit class columns (the CHECK's line break above is a continuation).
V2_SCHEMA = V1_SCHEMA.replace("user_version = 1", "user_version = 2").replace(
    "'planned', 'running', 'sealed', 'refused', 'failed', 'interrupted', 'deferred'",
    "'planned', 'running', 'accepted', 'refused', 'failed', 'timed-out', 'interrupted', "
    "'deferred'")
# (plan_index, control, attempt, state, run_id, reason, rerun_of, origin, link_reason)
V2_ROWS = [
    (0, "kv", 1, "accepted", "kv-1", None, None, "plan", None),
    (1, "slow", 1, "timed-out", "slow-1", "RUN-TIMEOUT: ran past 1m", None, "plan", None),
    (2, "disk", 1, "failed", "disk-1", "ENV-SEAL: could not seal: disk full; RUN-EXIT: 7",
     None, "plan", None),
    (3, "gate", 1, "refused", "gate-1", "[gate0] ENV-NO-ENGINE: a post-step's claim", None,
     "plan", None),
    (4, "named", 1, "refused", "named-1", "EVIDENCE-BAD-NAME: removed 'a; ENV-IO: x'", None,
     "plan", None),
    (5, "cut", 1, "interrupted", "cut-1", "harness stopped during the run", None, "plan", None),
    (6, "late", 1, "planned", None, "not run: its job was cancelled while pending", None,
     "plan", None),
    (7, "sick", 1, "deferred", None, "ENV-DOCTOR: disk: full", None, "plan", None),
]
V2_EVIDENCE = [  # (control, state, rules, exit class) once read as today's
    ("kv", "accepted", (), 0),
    ("slow", "timed-out", ("RUN-TIMEOUT",), 1),
    ("disk", "failed", ("ENV-SEAL",), 3),  # the rule its text begins with, and its class
    ("gate", "refused", ("ENV-NO-ENGINE",), 1),  # a post-step's: it never exits 3
    ("named", "refused", ("EVIDENCE-BAD-NAME",), 1),  # a rule in a detail is a detail
    ("cut", "interrupted", (), 1),
    ("late", "planned", (), None),  # no outcome
    ("sick", "deferred", ("ENV-DOCTOR",), 3),
]


def old_journal(tmp_path: Path, version: int = 1) -> Path:
    """A night journal as the version-1 (or 2) harness left it: rows, events, WAL mode."""
    path = tmp_path / JOURNAL_NAME
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(V1_SCHEMA if version == 1 else V2_SCHEMA)
    conn.execute("INSERT INTO night VALUES (1, 'camp', 'c.yaml', 'sha256:s', ?, NULL)", (T,))
    finish = FINISH if version == 1 else V2_FINISH
    for plan, control, attempt, state, run_id, reason, rerun_of, origin, link in (
            V1_ROWS if version == 1 else V2_ROWS):
        cur = conn.execute(
            "INSERT INTO runs (plan_index, control, repeat_index, attempt, state, run_id, "
            "run_dir, reason, rerun_of, origin, link_reason, updated) "
            "VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (plan, control, attempt, state, run_id, run_id and f"/runs/{run_id}", reason,
             rerun_of, origin, link, T))
        conn.execute("INSERT INTO events (run, event, from_state, to_state, detail, at) "
                     "VALUES (?, ?, NULL, 'planned', NULL, ?)", (cur.lastrowid, origin, T))
        if state in finish:
            conn.execute("INSERT INTO events (run, event, from_state, to_state, detail, at) "
                         "VALUES (?, ?, 'running', ?, ?, ?)",
                         (cur.lastrowid, finish[state], state, reason, T))
    conn.close()
    return path


MIGRATED = [  # (control, attempt, state, reason) in plan order
    ("kv", 1, "accepted", None),
    ("slow", 1, "timed-out", "RUN-TIMEOUT: ran past 1m"),
    ("boom", 1, "failed", "RUN-EXIT: the container exited 7"),
    ("gate", 1, "refused", "POST-GATE: differs"),
    ("gate", 2, "accepted", None),
    ("cut", 1, "interrupted", "RUN-INTERRUPTED: SIGTERM"),
    ("cut", 2, "accepted", None),
    ("late", 1, "planned", None),
    ("sick", 1, "deferred", "ENV-DOCTOR: disk: full"),
]


def states(j: Journal) -> list[tuple]:
    return [(r.control, r.attempt, r.state, r.reason) for r in j.rows()]


def test_a_read_only_open_reads_an_old_journal_in_todays_words_and_writes_nothing(tmp_path):
    path = old_journal(tmp_path)
    before = path.read_bytes()
    with Journal.open(path, readonly=True) as j:
        assert states(j) == MIGRATED
        slow = j.by_run_id("slow-1")
        assert [(e["event"], e["to_state"], e["detail"]) for e in j.events(slow.id)][-1] == (
            "time-out", "timed-out", "RUN-TIMEOUT: ran past 1m")
        assert [r.run_id for r in chain_of(j.rows(), "gate-1")] == ["gate-1", "gate-2"]
    assert path.read_bytes() == before
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


def test_a_writable_open_migrates_the_file_in_place(tmp_path: Path) -> None:
    path = old_journal(tmp_path)
    with Journal.open(path) as j:
        assert states(j) == MIGRATED
        events = [(e["run"], e["event"], e["from_state"], e["to_state"], e["detail"])
                  for e in j.events()]
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    assert schema.schema_of(raw) == schema.expected_schema()  # exactly today's schema
    assert raw.execute("SELECT count(*) FROM runs WHERE state IN ('sealed')").fetchone()[0] == 0
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert dict(raw.execute("SELECT name, seq FROM sqlite_sequence").fetchall()) == {
        "runs": len(V1_ROWS), "events": len(events)}
    raw.close()
    assert (1, "accept", "running", "accepted", None) in events
    assert (2, "time-out", "running", "timed-out", "RUN-TIMEOUT: ran past 1m") in events
    assert (3, "fail", "running", "failed", "RUN-EXIT: the container exited 7") in events
    assert len(events) == len(V1_ROWS) + sum(r[3] in FINISH for r in V1_ROWS)


def test_a_migrated_night_goes_on_as_before(tmp_path: Path) -> None:
    path = old_journal(tmp_path)
    with Journal.open(path) as j:
        action = next_step(j.rows(), RetryPolicy(1))
        assert (action.kind, action.row.control) == ("launch", "late")
        done = j.finish(j.mark_running(action.row, "late-1", "/runs/late-1"), "timed-out",
                        "RUN-TIMEOUT: again")
        assert (done.state, done.reason) == ("timed-out", "RUN-TIMEOUT: again")
        rerun = j.add_rerun("slow-1", "longer timeout")
        assert rerun.attempt == 2 and rerun.rerun_of == j.by_run_id("slow-1").id
        assert rerun.id == len(V1_ROWS) + 1  # ids go on counting where the old file was
    with Journal.open(path) as j:  # opening a migrated journal again changes nothing
        assert j.by_run_id("late-1").state == "timed-out"


def test_a_failed_migration_leaves_the_old_journal_whole(tmp_path: Path) -> None:
    path = old_journal(tmp_path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO events (run, event, to_state, at) VALUES (99, 'x', 'planned', ?)",
                 (T,))  # names a run that does not exist: the migration's check refuses it
    conn.close()
    with pytest.raises(EnvironmentFault, match=r"damaged.*names a run"):
        Journal.open(path)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    assert schema.schema_of(raw) == schema.expected_schema(1)
    assert raw.execute("SELECT count(*) FROM runs WHERE state = 'sealed'").fetchone()[0] == 3
    raw.close()


def test_an_old_journal_with_a_schema_not_its_own_is_refused_not_migrated(tmp_path: Path):
    path = old_journal(tmp_path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TRIGGER t AFTER UPDATE ON runs BEGIN SELECT 1; END")
    conn.close()
    for readonly in (True, False):
        with pytest.raises(EnvironmentFault, match=r"damaged.*schema"):
            Journal.open(path, readonly=readonly)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


@pytest.mark.parametrize(("old", "new"), [
    (("sealed", None), ("accepted", None)),
    (("failed", "timed-out: RUN-TIMEOUT: x"), ("timed-out", "RUN-TIMEOUT: x")),
    (("failed", "timed-out: timed-out"), ("timed-out", "timed-out")),
    (("failed", "RUN-EXIT: timed-out: no"), ("failed", "RUN-EXIT: timed-out: no")),
    (("refused", "timed-out: x"), ("refused", "timed-out: x")),
    *[((s, "r"), (s, "r")) for s in ("planned", "running", "interrupted", "deferred")],
])
def test_old_state_names_map_to_the_runs_words(old, new) -> None:
    assert upgrade_state(*old) == new


def test_old_events_map_to_the_runs_words() -> None:
    assert upgrade_event((1, 2, "seal", "running", "sealed", None, T)) == (
        1, 2, "accept", "running", "accepted", None, T)
    assert upgrade_event((1, 2, "fail", "running", "failed", "timed-out: RUN-TIMEOUT: x", T)) \
        == (1, 2, "time-out", "running", "timed-out", "RUN-TIMEOUT: x", T)
    assert upgrade_event((1, 2, "plan", None, "planned", None, T)) == (
        1, 2, "plan", None, "planned", None, T)


def evidence(j: Journal) -> list[tuple]:
    return [(r.control, r.state, r.rules, r.exit_class) for r in j.rows()]


def test_a_version_2_journal_reads_with_its_rules_and_exit_class_and_writes_nothing(tmp_path):
    path = old_journal(tmp_path, version=2)
    before = path.read_bytes()
    with Journal.open(path, readonly=True) as j:
        assert evidence(j) == V2_EVIDENCE
        assert j.by_run_id("disk-1").reason == V2_ROWS[2][5]  # the text as it was
        assert night_exit_code(j.rows()) == 3
    assert path.read_bytes() == before
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2


def test_a_version_2_journal_migrates_with_rules_and_exit_class_stored(tmp_path: Path):
    path = old_journal(tmp_path, version=2)
    with Journal.open(path) as j:
        assert evidence(j) == V2_EVIDENCE
        late = j.mark_running(j.rows()[6], "late-1", "/runs/late-1")
        assert (late.reason, late.rules, late.exit_class) == (None, (), None)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    assert schema.schema_of(raw) == schema.expected_schema()
    stored = raw.execute("SELECT control, rules, exit_class FROM runs ORDER BY id").fetchall()
    raw.close()
    assert stored[:3] == [("kv", "[]", 0), ("slow", '["RUN-TIMEOUT"]', 1),
                          ("disk", '["ENV-SEAL"]', 3)]
    assert stored[7] == ("sick", '["ENV-DOCTOR"]', 3)
    with Journal.open(path) as j:  # today's file: opened as it is
        assert j.by_run_id("gate-1").exit_class == 1


def test_a_version_1_journal_gets_its_rules_and_exit_class_once_too(tmp_path: Path):
    path = old_journal(tmp_path)
    with Journal.open(path) as j:
        got = {r.control: (r.rules, r.exit_class) for r in j.rows() if r.attempt == 1}
    assert got["kv"] == ((), 0) and got["late"] == ((), None)
    assert got["slow"] == (("RUN-TIMEOUT",), 1) and got["sick"] == (("ENV-DOCTOR",), 3)
    assert got["gate"] == (("POST-REFUSED",), 1)  # "POST-GATE: ...": the post-step GATE's


@pytest.mark.parametrize(("state", "reason", "found"), [
    ("accepted", None, ("[]", 0)),
    ("running", None, (None, None)),
    ("planned", "not run: x", (None, None)),
    ("failed", "ENV-DISK-FULL: x; RUN-EXIT: 7", ('["ENV-DISK-FULL"]', 3)),
    ("refused", "[step] ENV-DISK-FULL: x", ('["ENV-DISK-FULL"]', 1)),
    ("refused", None, ("[]", 1)),
])
def test_an_old_rows_evidence_comes_from_the_reason_it_begins_with(state, reason, found):
    assert evidence_of(state, reason) == found

"""Journals an older harness wrote: the upgrade of their rows to today's schema.

An older row's rules and exit class derive from its reason text through `Reason.of`, as
the one reason it begins with: exactly what the exit code was decided on when written.
A writable open migrates in one transaction; a read-only open maps rows the same way."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from harness.base.errors import OK
from harness.base.reason import Reason, exit_class, rules
from harness.base.states import TERMINAL, State
from harness.measure.nightfolder.schema import (
    EVENT_COLUMNS,
    EVENTS_TABLE,
    ROW_COLUMNS,
    RUNS_TABLE,
    SCHEMA_VERSION,
    V2_ROW_COLUMNS,
    check_schema,
    damaged,
    harden,
)

_TIMED_OUT = "timed-out: "  # how version 1 told a time-out from a failure
_V1_EVENTS = {"seal": "accept"}
_V1_STATES = {"sealed": State.ACCEPTED}
# The states whose row holds an outcome: finished, interrupted, or deferred by the doctor.
_ENDED = frozenset({*TERMINAL, State.INTERRUPTED, State.DEFERRED})


def upgrade_state(state: str | None, reason: str | None) -> tuple[str | None, str | None]:
    """A version-1 (state, reason) in today's words. Pure."""
    if state == State.FAILED and reason is not None and reason.startswith(_TIMED_OUT):
        return State.TIMED_OUT, reason[len(_TIMED_OUT):]
    return _V1_STATES.get(state, state) if state is not None else None, reason


def evidence_of(state: str, reason: str | None) -> tuple[str | None, int | None]:
    """(rules as stored, exit class) of an older row in `state` with `reason`. Pure."""
    if state not in _ENDED:
        return None, None
    if state == State.ACCEPTED:
        return json.dumps([]), OK
    found = [Reason.of(reason or "")]
    return json.dumps(rules(found)), exit_class(found)


def upgrade_row(values: tuple, version: int) -> tuple:
    """A `runs` row as `version` stores it (its ROW_COLUMNS) as today's schema does. Pure."""
    if version >= SCHEMA_VERSION:
        return values
    if version == 1:
        state, reason = upgrade_state(values[5], values[8])
        values = (*values[:5], state, *values[6:8], reason, *values[9:])
    return (*values, *evidence_of(values[5], values[8]))


def upgrade_event(values: tuple, version: int = 1) -> tuple:
    """An `events` row (EVENT_COLUMNS order) of `version` as today's schema stores it. Pure."""
    if version != 1:
        return values
    ident, run, event, from_state, to_state, detail, at = values
    to_state, new_detail = upgrade_state(to_state, detail)
    if to_state == State.TIMED_OUT and to_state != values[4]:
        event, detail = "time-out", new_detail
    from_state, _ = upgrade_state(from_state, None)
    return ident, run, _V1_EVENTS.get(event, event), from_state, to_state, detail, at


def upgrade(path: Path, conn: sqlite3.Connection, version: int) -> None:
    """Inside the caller's transaction: the schema `version` checked, the tables re-created
    as today's with every row upgraded, and the result checked. ValueError or sqlite3.Error
    when the journal is not what its version says. The one upgrade a journal on disk
    (`migrate`) and a dry run's in-memory copy (`Journal.copy`) both go through."""
    check_schema(path, conn, version)
    _rebuild(conn, version)
    check_schema(path, conn, SCHEMA_VERSION)
    if conn.execute("PRAGMA foreign_key_check").fetchall():
        raise ValueError("a run or event names a run the journal does not hold")


def _rebuild(conn: sqlite3.Connection, version: int) -> None:
    """Inside the caller's transaction: the tables re-created as today's, rows upgraded."""
    runs = [upgrade_row(r, version) for r in conn.execute(
        f"SELECT {V2_ROW_COLUMNS} FROM runs ORDER BY id")]
    events = [upgrade_event(r, version) for r in conn.execute(
        f"SELECT {', '.join(EVENT_COLUMNS)} FROM events ORDER BY id")]
    sequence = conn.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    conn.execute("DROP TABLE events")
    conn.execute("DROP TABLE runs")
    conn.execute(RUNS_TABLE)
    conn.execute(EVENTS_TABLE)
    marks = ", ".join("?" * len(ROW_COLUMNS.split(", ")))
    conn.executemany(f"INSERT INTO runs ({ROW_COLUMNS}) VALUES ({marks})", runs)
    conn.executemany(f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)", events)
    conn.execute("DELETE FROM sqlite_sequence")  # ids keep counting where they were
    conn.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", sequence)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def migrate(path: Path) -> bool:
    """Upgrade the journal at `path` in one transaction; False when another harness did first."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    except sqlite3.Error as e:
        raise damaged(path, e) from None
    try:
        harden(conn)
        conn.execute("PRAGMA foreign_keys=OFF")  # tables are re-created; ids are kept
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version >= SCHEMA_VERSION:
                conn.execute("ROLLBACK")
                return False
            upgrade(path, conn, version)
            conn.execute("COMMIT")
        except BaseException as e:
            with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back itself
                conn.execute("ROLLBACK")
            if isinstance(e, (sqlite3.Error, ValueError)):
                raise damaged(path, e) from None
            raise
    except sqlite3.Error as e:
        raise damaged(path, e) from None
    finally:
        conn.close()
    return True

"""Journals written by an older harness: their schema, and the upgrade to today's.

Version 1 named an accepted run `sealed`, and recorded a timed-out run as `failed` with a
"timed-out: " prefix on its reason. Version 2 speaks the run's language: the state is the
sealed folder's status (`accepted`, `refused`, `failed`, `timed-out`, `interrupted`).

A writable open migrates the file in place, in one transaction (a crash leaves version 1
whole); a read-only open (reports, status) never writes and reads version-1 rows through
the same pure mapping instead.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from harness.driver.night.schema import (
    EVENT_COLUMNS,
    EVENTS_TABLE,
    ROW_COLUMNS,
    RUNS_TABLE,
    SCHEMA_VERSION,
    check_schema,
    damaged,
    harden,
)

_TIMED_OUT = "timed-out: "  # how version 1 told a time-out from a failure
_V1_EVENTS = {"seal": "accept"}
_V1_STATES = {"sealed": "accepted"}


def upgrade_state(state: str | None, reason: str | None) -> tuple[str | None, str | None]:
    """A version-1 (state, reason) in today's words. Pure."""
    if state == "failed" and reason is not None and reason.startswith(_TIMED_OUT):
        return "timed-out", reason[len(_TIMED_OUT):]
    return _V1_STATES.get(state, state) if state is not None else None, reason


def upgrade_row(values: tuple) -> tuple:
    """A version-1 `runs` row (ROW_COLUMNS order) as version 2 stores it. Pure."""
    state, reason = upgrade_state(values[5], values[8])
    return (*values[:5], state, *values[6:8], reason, *values[9:])


def upgrade_event(values: tuple) -> tuple:
    """A version-1 `events` row (EVENT_COLUMNS order) as version 2 stores it. Pure."""
    ident, run, event, from_state, to_state, detail, at = values
    to_state, new_detail = upgrade_state(to_state, detail)
    if to_state == "timed-out" and to_state != values[4]:
        event, detail = "time-out", new_detail
    from_state, _ = upgrade_state(from_state, None)
    return ident, run, _V1_EVENTS.get(event, event), from_state, to_state, detail, at


def _rebuild(conn: sqlite3.Connection) -> None:
    """Inside the caller's transaction: runs and events re-created as version 2 has them."""
    runs = [upgrade_row(r) for r in conn.execute(f"SELECT {ROW_COLUMNS} FROM runs ORDER BY id")]
    events = [upgrade_event(r) for r in conn.execute(
        f"SELECT {', '.join(EVENT_COLUMNS)} FROM events ORDER BY id")]
    sequence = conn.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    conn.execute("DROP TABLE events")
    conn.execute("DROP TABLE runs")
    conn.execute(RUNS_TABLE)
    conn.execute(EVENTS_TABLE)
    conn.executemany(f"INSERT INTO runs ({ROW_COLUMNS}) VALUES ({', '.join('?' * 13)})", runs)
    conn.executemany(f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)", events)
    conn.execute("DELETE FROM sqlite_sequence")  # ids keep counting where they were
    conn.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", sequence)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def migrate(path: Path) -> bool:
    """Upgrade the version-1 journal at `path` to today's schema, in one transaction.

    Returns False when there was nothing to do (another harness migrated it first).
    The caller has checked the file (`check_file`); it is checked again under the lock."""
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
            if conn.execute("PRAGMA user_version").fetchone()[0] != 1:
                conn.execute("ROLLBACK")
                return False
            check_schema(path, conn, 1)
            _rebuild(conn)
            check_schema(path, conn, SCHEMA_VERSION)
            if conn.execute("PRAGMA foreign_key_check").fetchall():
                raise ValueError("a run or event names a run the journal does not hold")
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

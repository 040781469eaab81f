"""The journal file's schema, the checks that refuse any file but our own, and the upgrade
of a journal an older harness wrote.

Version 1 said `sealed` for accepted; 2 uses the run's status; 3 adds a row's rule ids
and exit class, so the night decides from them and never from the reason's text. An older
row's rules and exit class derive from its reason text through `Reason.of`, as the one
reason it begins with: exactly what the exit code was decided on when written. A writable
open migrates in one transaction; a read-only open maps rows the same way."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import stat
from collections.abc import Sequence
from pathlib import Path

from harness.base.errors import OK, EnvironmentFault, InvalidInput
from harness.base.reason import Reason, exit_class, rules
from harness.base.states import TERMINAL, State

APPLICATION_ID = 0x484E4A31  # "HNJ1": marks the file as ours, so a foreign SQLite file is refused
SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, SCHEMA_VERSION)  # older ones migrate on a writable open

NIGHT_TABLE = """CREATE TABLE night (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    campaign TEXT NOT NULL,
    campaign_file TEXT NOT NULL,
    seal TEXT,
    created TEXT NOT NULL,
    deadline TEXT
)"""
_RUNS_TABLE = """CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_index INTEGER NOT NULL,
    control TEXT NOT NULL,
    repeat_index INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ({states})),
    run_id TEXT UNIQUE,
    run_dir TEXT,
    reason TEXT,
    rerun_of INTEGER REFERENCES runs(id),
    origin TEXT NOT NULL CHECK (origin IN ('plan', 'retry', 'rerun')),
    link_reason TEXT,
    updated TEXT NOT NULL,{outcome}
    UNIQUE (plan_index, attempt)
)"""
_OUTCOME_COLUMNS = """
    rules TEXT,
    exit_class INTEGER CHECK (exit_class IN (0, 1, 2, 3)),"""
EVENTS_TABLE = """CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run INTEGER NOT NULL REFERENCES runs(id),
    event TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    detail TEXT,
    at TEXT NOT NULL
)"""


# The states each version's CHECK lists, in the order its CREATE TABLE spells them (the
# schema check compares that text exactly). Version 1 said `sealed` for accepted.
_STATES = (State.PLANNED, State.RUNNING, State.ACCEPTED, State.REFUSED, State.FAILED,
           State.TIMED_OUT, State.INTERRUPTED, State.DEFERRED)
V1_STATES = (State.PLANNED, State.RUNNING, "sealed", State.REFUSED, State.FAILED,
             State.INTERRUPTED, State.DEFERRED)


def runs_table(version: int = SCHEMA_VERSION) -> str:
    """The `runs` table of `version` (1, 2 or today's)."""
    states = V1_STATES if version == 1 else _STATES
    return _RUNS_TABLE.format(states=", ".join(repr(str(s)) for s in states),
                              outcome=_OUTCOME_COLUMNS if version >= 3 else "")


RUNS_TABLE = runs_table()


def statements_of(version: int) -> list[str]:
    """The statements that create an empty journal of `version` (1, 2 or today's)."""
    if version not in READABLE_VERSIONS:
        raise ValueError(f"no journal schema version {version}")
    return [f"PRAGMA application_id = {APPLICATION_ID}", f"PRAGMA user_version = {version}",
            NIGHT_TABLE, runs_table(version), EVENTS_TABLE]


# The columns every version has, in Row's order; today's adds the outcome's evidence.
V2_ROW_COLUMNS = ("id, plan_index, control, repeat_index, attempt, state, run_id, run_dir, "
                  "reason, rerun_of, origin, link_reason, updated")
ROW_COLUMNS = V2_ROW_COLUMNS + ", rules, exit_class"
EVENT_COLUMNS = ("id", "run", "event", "from_state", "to_state", "detail", "at")
# What each column read may hold, as the schema says: a value of any other type (a BLOB, a
# REAL, NULL in a NOT NULL column) means the file was edited outside the harness.
V2_ROW_TYPES: tuple[tuple[type, ...], ...] = (
    (int,), (int,), (str,), (int,), (int,), (str,), (str, type(None)), (str, type(None)),
    (str, type(None)), (int, type(None)), (str,), (str, type(None)), (str,))
ROW_TYPES = (*V2_ROW_TYPES, (str, type(None)), (int, type(None)))
MAX_RULES = 256  # rule ids one row names; the harness's own outcomes name a handful
MAX_RULE_CHARS = 200
NIGHT_TYPES: tuple[tuple[type, ...], ...] = ((str,), (str,), (str, type(None)), (str,),
                                              (str, type(None)))
EVENT_TYPES: tuple[tuple[type, ...], ...] = (
    (int,), (int,), (str,), (str, type(None)), (str,), (str, type(None)), (str,))
ORIGINS = ("plan", "retry", "rerun")
# Bounds on one value: a read of anything longer fails in SQLite itself ("string or blob too
# big") instead of filling memory; the harness clamps what it writes far below that bound.
MAX_VALUE_BYTES = 4_000_000
MAX_TEXT_CHARS = 50_000
# A night journal, with its WAL, holds a few MiB (rows' texts are clamped to MAX_TEXT_CHARS);
# a bigger file is not ours, and reading it whole (quick_check, rows) would take minutes.
MAX_JOURNAL_BYTES = 256 * 1024 * 1024


def damaged(path: Path, err: Exception) -> EnvironmentFault:
    return EnvironmentFault(f"journal {path} is damaged or unreadable ({err}); it was left "
                            "untouched. Move it aside to start a new night there, or restore "
                            "it from a backup.")


@functools.cache
def expected_schema(version: int = SCHEMA_VERSION) -> tuple[tuple, ...]:
    """sqlite_master as `create` leaves it for `version`; cached, as a report opens hundreds."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in statements_of(version):
            conn.execute(statement)
        return schema_of(conn)
    finally:
        conn.close()


def schema_of(conn: sqlite3.Connection) -> tuple[tuple, ...]:
    return tuple(sorted(
        conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
        key=repr,
    ))


def harden(conn: sqlite3.Connection) -> None:
    """Bound what one read may return and never run SQL functions named by the file."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.execute("PRAGMA trusted_schema=OFF")


def check_schema(path: Path, conn: sqlite3.Connection, version: int = SCHEMA_VERSION) -> None:
    """Refuse any schema but ours, exactly: no view, trigger or altered column runs on a read."""
    found, wanted = schema_of(conn), expected_schema(version)
    if found != wanted:
        extra = sorted({r[1] for r in set(found) ^ set(wanted)})
        raise damaged(path, ValueError(
            f"schema is not the harness journal schema (differs in {extra[:8]})"))


def typed(path: Path, what: str, values: Sequence, types: Sequence[tuple[type, ...]]) -> tuple:
    """`values` as read, once each has the type the schema says; anything else is damage."""
    if len(values) != len(types):
        raise damaged(path, ValueError(f"{what} has {len(values)} columns"))
    for i, (v, allowed) in enumerate(zip(values, types, strict=True)):
        if type(v) not in allowed:
            raise damaged(path, ValueError(
                f"{what} column {i + 1} holds a {type(v).__name__} value"))
    return tuple(values)


def clamp(value: object) -> object:
    """Text the harness writes, kept far below the read bound so its own journal reads back."""
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        return f"{value[:MAX_TEXT_CHARS]}... ({len(value) - MAX_TEXT_CHARS} more characters)"
    return value


SIDE_FILES = ("-journal", "-wal", "-shm")  # SQLite opens these beside the journal itself


def check_place(path: Path) -> None:
    """Refuse, before SQLite opens it, a journal that is not a regular file of its own, or
    one beside a side file (SIDE_FILES) that is not: a link may lead out of the runs folder,
    and SQLite opening a FIFO waits forever. Also one whose files together are over
    MAX_JOURNAL_BYTES (each open checks and may read it all). InvalidInput (exit 2)."""
    total = 0
    for suffix in ("", *SIDE_FILES):
        name = f"{path}{suffix}"
        try:
            st = os.lstat(name)
        except (OSError, ValueError):
            if suffix:
                continue
            raise InvalidInput(f"no night journal at {path}") from None
        what = f"the night journal{' side file' if suffix else ''}"
        if stat.S_ISLNK(st.st_mode):
            raise InvalidInput(f"{name}: {what} is a symlink; a journal is read only where its "
                               "night is")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"{name}: {what} is not a regular file")
        total += st.st_size
    if total > MAX_JOURNAL_BYTES:
        raise InvalidInput(f"{path}: the night journal is {total} bytes with its side files, "
                           f"over the {MAX_JOURNAL_BYTES} byte limit; it was left untouched")


def check_file(path: Path) -> int:
    """Validate an existing journal read-only, before any write; return its schema version."""
    try:
        ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise damaged(path, e) from None
    try:
        return check_connection(path, ro)
    finally:
        ro.close()


def check_connection(path: Path, conn: sqlite3.Connection) -> int:
    """`check_file` on the connection the caller then reads through."""
    try:
        harden(conn)
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id == APPLICATION_ID and version in READABLE_VERSIONS:
            check_schema(path, conn, version)
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.Error as e:
        raise damaged(path, e) from None
    if app_id != APPLICATION_ID:
        raise InvalidInput(
            f"{path} is not a harness night journal (SQLite application_id {app_id:#x}); "
            "it was left untouched"
        )
    if version not in READABLE_VERSIONS:
        raise InvalidInput(
            f"journal {path} has schema version {version}; this harness reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}. Use the harness version that wrote it."
        )
    if check != "ok":
        raise damaged(path, ValueError(f"integrity check: {check}"))
    return version


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
    check_schema(path, conn, SCHEMA_VERSION)
    if conn.execute("PRAGMA foreign_key_check").fetchall():
        raise ValueError("a run or event names a run the journal does not hold")


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

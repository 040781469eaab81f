"""The night journal: a durable record of every planned run and its state, in SQLite.

A night must survive `kill -9`, a reboot or a power cut and resume without repeating a
sealed run. So every state change is its own transaction, committed (WAL, synchronous=FULL)
before the caller starts the action it announces: `mark_running` returns only once the
journal says `running`, and only then does the caller launch the container.

The rules (which moves are legal, what to do next, what to do on resume) are pure
functions over rows, so they are tested without a database. `Journal` is the thin shell.
A file that is not a harness journal, or is damaged, is refused with a clear message and
left exactly where it is: this module never deletes or rewrites a file it did not create.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import EnvironmentFault, InvalidInput
from harness.night.transitions import (
    EVENTS,
    STATES,
    TERMINAL,
    TRANSITIONS,
    Action,
    IllegalTransition,
    RetryPolicy,
    Row,
    latest_attempts,
    next_action,
    resume_steps,
    transition,
)

__all__ = [
    "EVENTS",
    "JOURNAL_NAME",
    "STATES",
    "TERMINAL",
    "TRANSITIONS",
    "Action",
    "IllegalTransition",
    "Journal",
    "Night",
    "RetryPolicy",
    "Row",
    "latest_attempts",
    "next_action",
    "resume_steps",
    "transition",
]

APPLICATION_ID = 0x484E4A31  # "HNJ1": marks the file as ours, so a foreign SQLite file is refused
SCHEMA_VERSION = 1
JOURNAL_NAME = "journal.sqlite"


@dataclass(frozen=True)
class Night:
    """The night's identity: which campaign, from which file, under which source seal."""

    campaign: str
    campaign_file: str
    seal: str | None
    created: str
    deadline: str | None


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_SCHEMA = f"""
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
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
    state TEXT NOT NULL CHECK (state IN ({", ".join(repr(s) for s in STATES)})),
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
_ROW_COLUMNS = (
    "id, plan_index, control, repeat_index, attempt, state, run_id, run_dir, reason, "
    "rerun_of, origin, link_reason, updated"
)
_EVENT_KEYS = ("id", "run", "event", "from_state", "to_state", "detail", "at")
# What each column read may hold, as the schema says: a value of any other type (a BLOB, a
# REAL, NULL in a NOT NULL column) means the file was edited outside the harness.
_ROW_TYPES: tuple[tuple[type, ...], ...] = (
    (int,), (int,), (str,), (int,), (int,), (str,), (str, type(None)), (str, type(None)),
    (str, type(None)), (int, type(None)), (str,), (str, type(None)), (str,),
)
_NIGHT_TYPES: tuple[tuple[type, ...], ...] = (
    (str,), (str,), (str, type(None)), (str,), (str, type(None)),
)
_EVENT_TYPES: tuple[tuple[type, ...], ...] = (
    (int,), (int,), (str,), (str, type(None)), (str,), (str, type(None)), (str,),
)
_ORIGINS = ("plan", "retry", "rerun")
# Bounds on one value: a read of anything longer fails in SQLite itself ("string or blob too
# big") instead of filling memory; the harness clamps what it writes far below that bound.
MAX_VALUE_BYTES = 4_000_000
MAX_TEXT_CHARS = 50_000


def _damaged(path: Path, err: Exception) -> EnvironmentFault:
    return EnvironmentFault(
        f"journal {path} is damaged or unreadable ({err}); it was left untouched. "
        "Move it aside to start a new night there, or restore it from a backup."
    )


@functools.cache
def _expected_schema() -> tuple[tuple, ...]:
    """sqlite_master as `create` leaves it: every table, index, view and trigger, with its SQL."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        return _schema_of(conn)
    finally:
        conn.close()


def _schema_of(conn: sqlite3.Connection) -> tuple[tuple, ...]:
    return tuple(sorted(
        conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
        key=repr,
    ))


def _harden(conn: sqlite3.Connection) -> None:
    """Bound what one read may return and never run SQL functions named by the file."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.execute("PRAGMA trusted_schema=OFF")


def _check_schema(path: Path, conn: sqlite3.Connection) -> None:
    """Refuse any schema but the harness's own, exactly: no view posing as a table, no
    generated column, trigger, extra index or altered column can run code on a read."""
    found = _schema_of(conn)
    if found != _expected_schema():
        extra = sorted({r[1] for r in set(found) ^ set(_expected_schema())})
        raise _damaged(path, ValueError(
            f"schema is not the harness journal schema (differs in {extra[:8]})"))


def _typed(path: Path, what: str, values: Sequence, types: Sequence[tuple[type, ...]]) -> tuple:
    """`values` as read, once each has the type the schema says; anything else is damage."""
    if len(values) != len(types):
        raise _damaged(path, ValueError(f"{what} has {len(values)} columns"))
    for i, (v, allowed) in enumerate(zip(values, types, strict=True)):
        if type(v) not in allowed:
            raise _damaged(path, ValueError(
                f"{what} column {i + 1} holds a {type(v).__name__} value"))
    return tuple(values)


def _clamp(value: object) -> object:
    """Text the harness writes, kept far below the read bound so its own journal reads back."""
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        return f"{value[:MAX_TEXT_CHARS]}... ({len(value) - MAX_TEXT_CHARS} more characters)"
    return value


def _check_file(path: Path) -> None:
    """Validate an existing journal read-only, before anything may write to it."""
    try:
        ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise _damaged(path, e) from None
    try:
        _harden(ro)
        app_id = ro.execute("PRAGMA application_id").fetchone()[0]
        version = ro.execute("PRAGMA user_version").fetchone()[0]
        if app_id == APPLICATION_ID and version == SCHEMA_VERSION:
            _check_schema(path, ro)
        check = ro.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.Error as e:
        raise _damaged(path, e) from None
    finally:
        ro.close()
    if app_id != APPLICATION_ID:
        raise InvalidInput(
            f"{path} is not a harness night journal (SQLite application_id {app_id:#x}); "
            "it was left untouched"
        )
    if version != SCHEMA_VERSION:
        raise InvalidInput(
            f"journal {path} has schema version {version}; this harness reads version "
            f"{SCHEMA_VERSION}. Use the harness version that wrote it."
        )
    if check != "ok":
        raise _damaged(path, ValueError(f"integrity check: {check}"))


class Journal:
    """The durable journal of one night. Use `create`, `open` or `open_or_create`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, now: Callable[[], str]) -> None:
        self.path = path
        self._conn = conn
        self._now = now

    # -- opening ---------------------------------------------------------------------------

    @staticmethod
    def _connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
        if readonly:  # reports: never write, not even the WAL mode switch
            uri = f"{path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
            _harden(conn)
            return conn
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        _harden(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @classmethod
    def open(
        cls, path: Path, *, now: Callable[[], str] = utc_now, readonly: bool = False
    ) -> Journal:
        """Open an existing journal; a missing, foreign or damaged file is a clear error."""
        path = Path(path)
        if not path.is_file():
            raise InvalidInput(f"no night journal at {path}")
        _check_file(path)
        try:
            conn = cls._connect(path, readonly)
        except sqlite3.Error as e:
            raise _damaged(path, e) from None
        journal = cls(path, conn, now)
        try:
            _check_schema(path, conn)  # again, on the connection used: the file may have changed
            journal.night()
        except (sqlite3.Error, EnvironmentFault) as e:
            conn.close()
            if isinstance(e, EnvironmentFault):
                raise
            raise _damaged(path, e) from None
        return journal

    @classmethod
    def create(
        cls,
        path: Path,
        *,
        campaign: str,
        campaign_file: str,
        plan: Sequence[tuple[str, int]],
        seal: str | None = None,
        deadline: str | None = None,
        now: Callable[[], str] = utc_now,
    ) -> Journal:
        """Create a new journal holding `plan` (control name, repeat index) as planned rows."""
        path = Path(path)
        if path.exists():
            raise InvalidInput(f"{path} exists; a journal is never overwritten")
        created = now()
        try:
            conn = cls._connect(path)
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO night VALUES (1, ?, ?, ?, ?, ?)",
                (campaign, campaign_file, seal, created, deadline),
            )
            for index, (control, repeat) in enumerate(plan):
                cur = conn.execute(
                    "INSERT INTO runs (plan_index, control, repeat_index, attempt, state, "
                    "origin, updated) VALUES (?, ?, ?, 1, 'planned', 'plan', ?)",
                    (index, control, repeat, created),
                )
                conn.execute(
                    "INSERT INTO events (run, event, from_state, to_state, at) "
                    "VALUES (?, 'plan', NULL, 'planned', ?)",
                    (cur.lastrowid, created),
                )
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise EnvironmentFault(f"cannot create night journal {path}: {e}") from None
        return cls(path, conn, now)

    @classmethod
    def open_or_create(
        cls,
        path: Path,
        *,
        campaign: str,
        campaign_file: str,
        plan: Sequence[tuple[str, int]],
        seal: str | None = None,
        deadline: str | None = None,
        now: Callable[[], str] = utc_now,
    ) -> Journal:
        """Resume the night at `path` if it exists and matches this campaign, else start it."""
        path = Path(path)
        if not path.exists():
            return cls.create(
                path, campaign=campaign, campaign_file=campaign_file, plan=plan, seal=seal,
                deadline=deadline, now=now,
            )
        journal = cls.open(path, now=now)
        faults = journal.mismatches(campaign=campaign, plan=plan, seal=seal)
        if faults:
            journal.close()
            raise InvalidInput(f"journal {path} belongs to another night", faults=faults)
        return journal

    def mismatches(
        self, *, campaign: str, plan: Sequence[tuple[str, int]], seal: str | None
    ) -> list[str]:
        """Why this journal is not the night described, one line each (empty: it is)."""
        night = self.night()
        faults = []
        if night.campaign != campaign:
            faults.append(f"journal campaign is {night.campaign!r}, not {campaign!r}")
        if seal is not None and night.seal is not None and night.seal != seal:
            faults.append(f"journal source seal is {night.seal}, now {seal}: sources changed")
        planned = sorted(
            {(r.plan_index, r.control, r.repeat_index) for r in self.rows()}
        )
        wanted = [(i, c, rep) for i, (c, rep) in enumerate(plan)]
        if planned != wanted:
            faults.append("journal plan differs from the campaign's plan")
        return faults

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        """Every row `sql` returns; any SQLite error reading a journal means it is damaged."""
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise _damaged(self.path, e) from None

    def _row(self, values: Sequence) -> Row:
        row = Row(*_typed(self.path, "runs row", values, _ROW_TYPES))
        if row.state not in STATES or row.origin not in _ORIGINS:
            raise _damaged(self.path, ValueError(
                f"runs row {row.id} has state {row.state[:40]!r}, origin {row.origin[:40]!r}"))
        return row

    def night(self) -> Night:
        found = self._read(
            "SELECT campaign, campaign_file, seal, created, deadline FROM night WHERE id = 1"
        )
        if not found:
            raise _damaged(self.path, ValueError("no night record"))
        return Night(*_typed(self.path, "night record", found[0], _NIGHT_TYPES))

    def rows(self) -> list[Row]:
        found = self._read(f"SELECT {_ROW_COLUMNS} FROM runs ORDER BY plan_index, attempt")
        return [self._row(r) for r in found]

    def row(self, row_id: int) -> Row:
        found = self._read(f"SELECT {_ROW_COLUMNS} FROM runs WHERE id = ?", (row_id,))
        if not found:
            raise InvalidInput(f"journal {self.path} has no run row {row_id}")
        return self._row(found[0])

    def by_run_id(self, run_id: str) -> Row | None:
        found = self._read(f"SELECT {_ROW_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))
        return self._row(found[0]) if found else None

    def events(self, row_id: int | None = None) -> list[dict]:
        sql = "SELECT id, run, event, from_state, to_state, detail, at FROM events"
        args: tuple = ()
        if row_id is not None:
            sql += " WHERE run = ?"
            args = (row_id,)
        return [dict(zip(_EVENT_KEYS, _typed(self.path, "event", r, _EVENT_TYPES), strict=True))
                for r in self._read(sql + " ORDER BY id", args)]

    def chain(self, run_id: str) -> list[Row]:
        """Every attempt linked to `run_id` by rerun_of, both ways, oldest first."""
        start = self.by_run_id(run_id)
        if start is None:
            return []
        by_id = {r.id: r for r in self.rows()}
        root = start
        seen = {root.id}
        while root.rerun_of is not None and root.rerun_of in by_id and root.rerun_of not in seen:
            root = by_id[root.rerun_of]
            seen.add(root.id)
        children: dict[int, list[Row]] = {}
        for r in by_id.values():
            if r.rerun_of is not None:
                children.setdefault(r.rerun_of, []).append(r)
        out, todo, visited = [], [root], set()
        while todo:
            r = todo.pop(0)
            if r.id in visited:
                continue
            visited.add(r.id)
            out.append(r)
            todo.extend(sorted(children.get(r.id, []), key=lambda c: c.id))
        return sorted(out, key=lambda r: (r.attempt, r.id))

    # -- writing: each method is one committed transaction --------------------------------

    def _move(self, row: Row | int, event: str, detail: str | None = None, **sets: object) -> Row:
        """Apply `event` to the row if it is still in the state the caller saw; commit."""
        row_id = row if isinstance(row, int) else row.id
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = conn.execute("SELECT state FROM runs WHERE id = ?", (row_id,)).fetchone()
            if found is None:
                raise InvalidInput(f"journal {self.path} has no run row {row_id}")
            current = found[0]
            if not isinstance(row, int) and row.state != current:
                raise IllegalTransition(
                    f"journal: run row {row_id} is {current!r}, not {row.state!r} as expected "
                    "(is another harness writing this night?)"
                )
            new = transition(current, event)
            at = self._now()
            detail = _clamp(detail)  # type: ignore[assignment]
            sets = {k: _clamp(v) for k, v in sets.items()}
            assignments = ", ".join(f"{k} = ?" for k in sets)
            conn.execute(
                f"UPDATE runs SET state = ?, updated = ?{', ' if sets else ''}{assignments} "
                "WHERE id = ?",
                (new, at, *sets.values(), row_id),
            )
            conn.execute(
                "INSERT INTO events (run, event, from_state, to_state, detail, at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (row_id, event, current, new, detail, at),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return self.row(row_id)

    def mark_running(self, row: Row | int, run_id: str, run_dir: str) -> Row:
        """Commit `running` with the run's id and folder; only then may the caller launch."""
        return self._move(row, "start", run_id, run_id=run_id, run_dir=str(run_dir))

    def mark_sealed(self, row: Row | int) -> Row:
        return self._move(row, "seal")

    def mark_refused(self, row: Row | int, reason: str) -> Row:
        return self._move(row, "refuse", reason, reason=reason)

    def mark_failed(self, row: Row | int, reason: str) -> Row:
        return self._move(row, "fail", reason, reason=reason)

    def mark_interrupted(self, row: Row | int, reason: str) -> Row:
        return self._move(row, "interrupt", reason, reason=reason)

    def mark_deferred(self, row: Row | int, reason: str) -> Row:
        return self._move(row, "defer", reason, reason=reason)

    def requeue(self, row: Row | int) -> Row:
        return self._move(row, "requeue", reason=None)

    def _add_attempt(self, prior: Row, origin: str, link_reason: str) -> Row:
        link_reason = str(_clamp(link_reason))
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            attempt = conn.execute(
                "SELECT MAX(attempt) FROM runs WHERE plan_index = ?", (prior.plan_index,)
            ).fetchone()[0]
            at = self._now()
            cur = conn.execute(
                "INSERT INTO runs (plan_index, control, repeat_index, attempt, state, rerun_of, "
                "origin, link_reason, updated) VALUES (?, ?, ?, ?, 'planned', ?, ?, ?, ?)",
                (prior.plan_index, prior.control, prior.repeat_index, attempt + 1, prior.id,
                 origin, link_reason, at),
            )
            conn.execute(
                "INSERT INTO events (run, event, from_state, to_state, detail, at) "
                "VALUES (?, ?, NULL, 'planned', ?, ?)",
                (cur.lastrowid, origin, link_reason, at),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return self.row(int(cur.lastrowid))

    def add_retry(self, interrupted: Row) -> Row:
        """A new attempt for an interrupted slot, linked to it (the caller checked the policy)."""
        current = self.row(interrupted.id)
        if current.state != "interrupted":
            raise IllegalTransition(f"journal: cannot retry a run that is {current.state!r}")
        return self._add_attempt(current, "retry", "retry after interrupted")

    def add_rerun(self, run_id: str, reason: str) -> Row:
        """An operator rerun of a finished run: a new attempt naming the original and why.

        The original row is not touched, so a refused run stays refused.
        """
        if not reason.strip():
            raise InvalidInput("a rerun needs a reason")
        original = self.by_run_id(run_id)
        if original is None:
            raise InvalidInput(f"run {run_id} is not in journal {self.path}")
        if original.state not in TERMINAL | {"interrupted"}:
            raise InvalidInput(f"run {run_id} is {original.state}; only a finished run is rerun")
        return self._add_attempt(original, "rerun", reason)

    def apply(self, action: Action, reason: str = "harness stopped during the run") -> Row | None:
        """Carry out a bookkeeping action from `next_action`/`resume_steps` (not `launch`)."""
        if action.row is None or action.kind in ("done", "launch"):
            return action.row
        if action.kind == "interrupt":
            return self.mark_interrupted(action.row, reason)
        if action.kind == "requeue":
            return self.requeue(action.row)
        if action.kind == "retry":
            return self.add_retry(action.row)
        raise InvalidInput(f"journal: unknown action {action.kind!r}")

    def resume(self) -> list[Row]:
        """Start-of-night recovery (see `resume_steps`): returns the rows it changed."""
        return [r for r in (self.apply(s) for s in resume_steps(self.rows())) if r is not None]

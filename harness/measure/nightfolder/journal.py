"""The night journal: a durable record of every planned run and its state, in SQLite.

A night must survive `kill -9` or a power cut and resume without repeating a finished
run, so every state change is its own transaction, committed (WAL, synchronous=FULL)
before the caller starts what it announces. The rules are pure (transitions.py)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.base.catalogue import RUN_INTERRUPTED
from harness.base.errors import OK, EnvironmentFault, InvalidInput
from harness.base.reason import Reason, exit_class, ordered, rules
from harness.base.states import TERMINAL, State, Status
from harness.base.timeutil import utc_now
from harness.measure.nightfolder import schema
from harness.measure.nightfolder.rows import RETRY, Row
from harness.measure.nightfolder.schema import SCHEMA_VERSION, clamp, damaged, typed
from harness.measure.nightfolder.transitions import (
    IllegalTransition,
    Step,
    outcome_event,
    resume_steps,
    transition,
)

Reasons = Iterable[Reason] | Reason | str  # typed reasons, or a note for people
Plan = Sequence[tuple[str, int]]  # (control name, repeat index) per slot
# Why a row a dead harness left `running` is interrupted when nothing else says more.
STOPPED = Reason(RUN_INTERRUPTED, "the harness stopped during the run")


def _reasons(given: Reasons) -> tuple[str, list[Reason]]:
    """(text people read, reasons decided on); a text note is the one reason it begins with."""
    if isinstance(given, str):
        return given, [Reason.of(given)] if given else []
    found = [Reason.of(r) for r in ([given] if isinstance(given, Reason) else given)]
    return "; ".join(r.text() for r in ordered(found)), found


def _evidence(found: list[Reason]) -> dict[str, object]:
    """A row's `rules` and `exit_class` columns for an outcome with these reasons."""
    return {"rules": json.dumps(rules(found)), "exit_class": exit_class(found)}


@dataclass(frozen=True)
class NightRecord:
    """The night's identity: which campaign, from which file, under which source seal."""

    campaign: str
    campaign_file: str
    seal: str | None
    created: str
    deadline: str | None


def _connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    if readonly:  # reports: never write, not even the WAL mode switch
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                               isolation_level=None, timeout=30.0)
        schema.harden(conn)
        return conn
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    schema.harden(conn)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


SETTLE_BUSY_MS = 1000  # a reader that holds the journal longer leaves the WAL files be


def settle(path: Path) -> bool:
    """Fold the WAL into the journal and leave it in rollback mode, so an ended night's folder
    holds journal.sqlite alone. Best effort: a reader holding the file leaves it as is; the
    next writable open switches back to WAL. True when done."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=SETTLE_BUSY_MS / 1000)
    except sqlite3.Error:
        return False
    try:
        schema.harden(conn)
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()
        return bool(busy and busy[0] == 0 and mode and str(mode[0]).lower() == "delete")
    except sqlite3.Error:
        return False
    finally:
        conn.close()


class Journal:
    """The durable journal of one night. Use `create`, `open` or `open_or_create`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, now: Callable[[], str],
                 version: int = SCHEMA_VERSION) -> None:
        self.path = path
        self._conn = conn
        self._now = now
        self._version = version  # older only for a read-only open of a file not migrated

    @classmethod
    def open(cls, path: Path, *, now: Callable[[], str] = utc_now,
             readonly: bool = False) -> Journal:
        """Open an existing journal; a writable open migrates an older one (one transaction)."""
        path = Path(path)
        schema.check_place(path)
        version = None if readonly else schema.check_file(path)
        if version is not None and version != SCHEMA_VERSION:
            schema.migrate(path)
            version = SCHEMA_VERSION
        try:
            conn = _connect(path, readonly)
        except sqlite3.Error as e:
            raise damaged(path, e) from None
        journal = cls(path, conn, now, version or SCHEMA_VERSION)
        try:  # again, on the connection used: the file may have changed. Read-only: the
            # whole check once, on the one connection that reads (a report opens hundreds)
            if version is None:
                journal._version = schema.check_connection(path, conn)
            else:
                schema.check_schema(path, conn, version)
            journal.night()
        except (sqlite3.Error, EnvironmentFault, InvalidInput) as e:
            conn.close()
            if not isinstance(e, sqlite3.Error):
                raise
            raise damaged(path, e) from None
        return journal

    @classmethod
    def create(cls, path: Path, *, campaign: str, campaign_file: str, plan: Plan,
               seal: str | None = None, deadline: str | None = None,
               now: Callable[[], str] = utc_now) -> Journal:
        """Create a new journal holding `plan` (control name, repeat index) as planned rows."""
        path = Path(path)
        if os.path.lexists(path):  # a dangling link too: SQLite would create its target
            raise InvalidInput(f"{path} exists; a journal is never overwritten")
        created = now()
        try:
            conn = _connect(path)
            conn.execute("BEGIN IMMEDIATE")
            for statement in schema.statements_of(SCHEMA_VERSION):
                conn.execute(statement)
            conn.execute("INSERT INTO night VALUES (1, ?, ?, ?, ?, ?)",
                         (campaign, campaign_file, seal, created, deadline))
            for index, (control, repeat) in enumerate(plan):
                cur = conn.execute(
                    "INSERT INTO runs (plan_index, control, repeat_index, attempt, state, "
                    "origin, updated) VALUES (?, ?, ?, 1, 'planned', 'plan', ?)",
                    (index, control, repeat, created))
                conn.execute("INSERT INTO events (run, event, from_state, to_state, at) "
                             "VALUES (?, 'plan', NULL, 'planned', ?)", (cur.lastrowid, created))
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise EnvironmentFault(f"cannot create night journal {path}: {e}") from None
        return cls(path, conn, now)

    @classmethod
    def open_or_create(cls, path: Path, *, campaign: str, campaign_file: str, plan: Plan,
                       seal: str | None = None, deadline: str | None = None,
                       now: Callable[[], str] = utc_now) -> Journal:
        """Resume the night at `path` if it exists and matches this campaign, else start it."""
        path = Path(path)
        if not os.path.lexists(path):
            return cls.create(path, campaign=campaign, campaign_file=campaign_file, plan=plan,
                              seal=seal, deadline=deadline, now=now)
        journal = cls.open(path, now=now)
        faults = journal.mismatches(campaign=campaign, plan=plan, seal=seal)
        if faults:
            journal.close()
            raise InvalidInput(f"journal {path} belongs to another night", faults=faults)
        return journal

    def mismatches(self, *, campaign: str, plan: Plan, seal: str | None) -> list[str]:
        """Why this journal is not the night described, one line each (empty: it is)."""
        night = self.night()
        faults = []
        if night.campaign != campaign:
            faults.append(f"journal campaign is {night.campaign!r}, not {campaign!r}")
        if seal is not None and night.seal is not None and night.seal != seal:
            faults.append(f"journal source seal is {night.seal}, now {seal}: sources changed")
        planned = sorted({(r.plan_index, r.control, r.repeat_index) for r in self.rows()})
        if planned != [(i, c, rep) for i, (c, rep) in enumerate(plan)]:
            faults.append("journal plan differs from the campaign's plan")
        return faults

    def copy(self) -> Journal:
        """A writable in-memory copy, rows upgraded: a dry run walks the night on it."""
        conn = sqlite3.connect(":memory:", isolation_level=None)
        self._conn.backup(conn)
        if self._version != SCHEMA_VERSION:
            conn.execute("BEGIN")
            schema.upgrade(self.path, conn, self._version)
            conn.execute("COMMIT")
        return Journal(self.path, conn, self._now)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        """Every row `sql` returns; any SQLite error reading a journal means it is damaged."""
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise damaged(self.path, e) from None

    @property
    def _columns(self) -> str:
        """The `runs` columns the file's version has (older ones lack the outcome's)."""
        return schema.ROW_COLUMNS if self._version >= SCHEMA_VERSION else schema.V2_ROW_COLUMNS

    def _row(self, values: Sequence) -> Row:
        older = self._version < SCHEMA_VERSION
        values = typed(self.path, "runs row", values,
                       schema.V2_ROW_TYPES if older else schema.ROW_TYPES)
        if older:
            values = schema.upgrade_row(values, self._version)
        *head, found, klass = values
        try:
            state = State(head[5])
        except ValueError:
            state = None
        if state is None or head[10] not in schema.ORIGINS:
            raise damaged(self.path, ValueError(
                f"runs row {head[0]} has state {head[5][:40]!r}, origin {head[10][:40]!r}"))
        return Row(*head[:5], state, *head[6:], self._rules(head[0], found), klass)

    def _rules(self, row_id: int, stored: str | None) -> tuple[str, ...]:
        """A row's rule ids as stored (a JSON list of short strings), or damage."""
        if stored is None:
            return ()
        try:
            found = json.loads(stored)
        except ValueError:
            found = None
        if not (isinstance(found, list) and len(found) <= schema.MAX_RULES and all(
                isinstance(r, str) and 0 < len(r) <= schema.MAX_RULE_CHARS for r in found)):
            raise damaged(self.path, ValueError(f"runs row {row_id} has rules that are not "
                                                "a list of rule ids"))
        return tuple(found)

    def night(self) -> NightRecord:
        found = self._read("SELECT campaign, campaign_file, seal, created, deadline FROM night "
                           "WHERE id = 1")
        if not found:
            raise damaged(self.path, ValueError("no night record"))
        return NightRecord(*typed(self.path, "night record", found[0], schema.NIGHT_TYPES))

    def rows(self) -> list[Row]:
        found = self._read(f"SELECT {self._columns} FROM runs ORDER BY plan_index, attempt")
        return [self._row(r) for r in found]

    def row(self, row_id: int) -> Row:
        found = self._read(f"SELECT {self._columns} FROM runs WHERE id = ?", (row_id,))
        if not found:
            raise InvalidInput(f"journal {self.path} has no run row {row_id}")
        return self._row(found[0])

    def by_run_id(self, run_id: str) -> Row | None:
        found = self._read(f"SELECT {self._columns} FROM runs WHERE run_id = ?", (run_id,))
        return self._row(found[0]) if found else None

    def events(self, row_id: int | None = None) -> list[dict]:
        sql = f"SELECT {', '.join(schema.EVENT_COLUMNS)} FROM events"
        args: tuple = ()
        if row_id is not None:
            sql += " WHERE run = ?"
            args = (row_id,)
        out = []
        for r in self._read(sql + " ORDER BY id", args):
            values = schema.upgrade_event(typed(self.path, "event", r, schema.EVENT_TYPES),
                                          self._version)
            out.append(dict(zip(schema.EVENT_COLUMNS, values, strict=True)))
        return out

    def _transaction(self, work: Callable[[sqlite3.Connection, str], int]) -> Row:
        """Run `work(conn, now)` in one immediate transaction; return the row it names."""
        if self._version != SCHEMA_VERSION:
            raise InvalidInput(f"journal {self.path} was opened read-only")
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            row_id = work(conn, self._now())
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return self.row(row_id)

    def _move(self, row: Row | int, event: str, detail: str | None = None, **sets: object) -> Row:
        """Apply `event` to the row if it is still in the state the caller saw; commit."""
        row_id = row if isinstance(row, int) else row.id

        def work(conn: sqlite3.Connection, at: str) -> int:
            found = conn.execute("SELECT state FROM runs WHERE id = ?", (row_id,)).fetchone()
            if found is None:
                raise InvalidInput(f"journal {self.path} has no run row {row_id}")
            current = found[0]
            if not isinstance(row, int) and row.state != current:
                raise IllegalTransition(
                    f"journal: run row {row_id} is {current!r}, not {row.state!r} as expected "
                    "(is another harness writing this night?)")
            new = transition(current, event)
            values = {k: clamp(v) for k, v in sets.items()}
            assignments = "".join(f", {k} = ?" for k in values)
            conn.execute(f"UPDATE runs SET state = ?, updated = ?{assignments} WHERE id = ?",
                         (new, at, *values.values(), row_id))
            conn.execute(
                "INSERT INTO events (run, event, from_state, to_state, detail, at) "
                "VALUES (?, ?, ?, ?, ?, ?)", (row_id, event, current, new, clamp(detail), at))
            return row_id

        return self._transaction(work)

    def mark_running(self, row: Row | int, run_id: str, run_dir: str) -> Row:
        """Commit `running` with the run's id and folder; only then may the caller launch."""
        return self._move(row, "start", run_id, run_id=run_id, run_dir=str(run_dir),
                          reason=None, rules=None, exit_class=None)  # a withdrawn row's
        # "not run" is history now

    def record_job(self, row: Row | int, token: str, job_id: str) -> Row:
        """Commit the Slurm job that runs this row (`<job id> <token>`, event `slurm-job`)."""
        return self._move(row, "slurm-job", f"{job_id} {token}")

    def job_of(self, row_id: int) -> str | None:
        """The newest Slurm job id recorded for the row, or None (a local run)."""
        found = [e["detail"] for e in self.events(row_id) if e["event"] == "slurm-job"]
        return found[-1].split(" ", 1)[0] if found and found[-1] else None

    def withdraw(self, row: Row | int, reason: str) -> Row:
        """Commit a row whose job was cancelled while pending: not run (planned again)."""
        return self._move(row, "withdraw", reason, reason=reason, run_id=None, run_dir=None)

    def leave(self, row: Row | int, reason: str) -> Row:
        """Commit why the walk ended before this planned row ran (it stays planned)."""
        return self._move(row, "leave", reason, reason=reason)

    def finish(self, row: Row | int, status: Status | str, reasons: Reasons = ()) -> Row:
        """Commit how the run ended, with the rules and exit class the night's exit code uses."""
        text, found = _reasons(reasons)
        event, reason = outcome_event(status, text)
        if reason is None:
            return self._move(row, event, rules=json.dumps([]), exit_class=OK)
        return self._move(row, event, reason, reason=reason, **_evidence(found))

    def mark_interrupted(self, row: Row | int, reasons: Reasons) -> Row:
        return self.finish(row, Status.INTERRUPTED, reasons)

    def mark_deferred(self, row: Row | int, reasons: Reasons) -> Row:
        """Commit that the doctor deferred the row: nothing was launched."""
        text, found = _reasons(reasons)
        return self._move(row, "defer", text, reason=text, **_evidence(found))

    def requeue(self, row: Row | int) -> Row:
        return self._move(row, "requeue", reason=None, rules=None, exit_class=None)

    def _add_attempt(self, prior: Row, origin: str, link_reason: str) -> Row:
        link_reason = str(clamp(link_reason))

        def work(conn: sqlite3.Connection, at: str) -> int:
            attempt = conn.execute("SELECT MAX(attempt) FROM runs WHERE plan_index = ?",
                                   (prior.plan_index,)).fetchone()[0]
            cur = conn.execute(
                "INSERT INTO runs (plan_index, control, repeat_index, attempt, state, rerun_of, "
                "origin, link_reason, updated) VALUES (?, ?, ?, ?, 'planned', ?, ?, ?, ?)",
                (prior.plan_index, prior.control, prior.repeat_index, attempt + 1, prior.id,
                 origin, link_reason, at))
            conn.execute(
                "INSERT INTO events (run, event, from_state, to_state, detail, at) "
                "VALUES (?, ?, NULL, 'planned', ?, ?)", (cur.lastrowid, origin, link_reason, at))
            return int(cur.lastrowid)

        return self._transaction(work)

    def add_retry(self, interrupted: Row) -> Row:
        """A new attempt for an interrupted slot, linked to it (the caller checked the policy)."""
        current = self.row(interrupted.id)
        if current.state != State.INTERRUPTED:
            raise IllegalTransition(f"journal: cannot retry a run that is {current.state!r}")
        return self._add_attempt(current, RETRY, "retry after interrupted")

    def add_rerun(self, run_id: str, reason: str) -> Row:
        """An operator rerun: a new attempt naming the original (left untouched) and why."""
        if not reason.strip():
            raise InvalidInput("a rerun needs a reason")
        original = self.by_run_id(run_id)
        if original is None:
            raise InvalidInput(f"run {run_id} is not in journal {self.path}")
        if original.state not in TERMINAL | {State.INTERRUPTED}:
            raise InvalidInput(f"run {run_id} is {original.state}; only a finished run is rerun")
        return self._add_attempt(original, "rerun", reason)

    def apply(self, step: Step, reason: Reasons = STOPPED) -> Row | None:
        """Carry out a bookkeeping step from `next_step`/`resume_steps` (not `launch`)."""
        if step.row is None or step.kind in ("done", "launch"):
            return step.row
        if step.kind == "interrupt":
            return self.mark_interrupted(step.row, reason)
        if step.kind == "requeue":
            return self.requeue(step.row)
        if step.kind == "retry":
            return self.add_retry(step.row)
        raise InvalidInput(f"journal: unknown step {step.kind!r}")

    def resume(self) -> list[Row]:
        """Start-of-night recovery (see `resume_steps`): returns the rows it changed."""
        return [r for r in (self.apply(s) for s in resume_steps(self.rows())) if r is not None]

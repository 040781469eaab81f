"""The night runner's decisions as pure functions (deadline, the next step, what counts as
finished, the exit code from each row's stored exit class, never its text), testable
without Docker, SQLite or a clock."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from harness.base.errors import ENVIRONMENT, OK, REFUSED, InvalidInput, Refused
from harness.base.states import TERMINAL, State
from harness.driver.policy import RetryPolicy, retry_allowed
from harness.measure.nightfolder.rows import RERUN, Row, latest_attempts
from harness.measure.nightfolder.transitions import Step

MAX_HOURS = 30 * 24.0  # a night is hours; a month is already generous
_UNTIL = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def parse_until(until: str, what: str = "--until") -> tuple[int, int]:
    m = _UNTIL.match(until.strip())
    if not m:
        raise InvalidInput(f"{what} {until!r}: expected a local time HH:MM, e.g. 06:30")
    return int(m.group(1)), int(m.group(2))


def parse_window(window: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """`--window START-END` (local HH:MM-HH:MM, may wrap midnight) -> (start, end)."""
    parts = window.split("-")
    if len(parts) != 2:
        raise InvalidInput(f"--window {window!r}: expected START-END local times, e.g. "
                           "22:00-06:30")
    start, end = (parse_until(p, "--window") for p in parts)
    if start == end:
        raise InvalidInput(f"--window {window!r}: the window opens and closes at the same time")
    return start, end


def in_window(now: datetime, start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether the local time of `now` is inside [start, end), which may wrap midnight."""
    at = (now.hour, now.minute)
    return start <= at < end if start < end else (at >= start or at < end)


def night_deadline(now: datetime, until: str | None, max_hours: float | None,
                   window: str | None) -> datetime | None:
    """The earliest of --until, --max-hours and --window's end. A start outside --window is
    refused (exit 1): a timer catching up at boot must not hold the GPU through the day."""
    found = _deadlines(now, until, max_hours, window)
    if window is not None and not in_window(now, *parse_window(window)):
        raise Refused(f"--window {window}: it is {now:%H:%M} local time, outside the night's "
                      "window; nothing was started (a night the timer missed while the host "
                      "was off waits for its next window)")
    return min((at for at, _ in found), default=None)


def deadline_named(now: datetime, until: str | None, max_hours: float | None,
                   window: str | None) -> str | None:
    """What sets `night_deadline`'s deadline (`--until 06:30`, ...), or None."""
    found = _deadlines(now, until, max_hours, window)
    return min(found, key=lambda p: p[0])[1] if found else None


def _deadlines(now: datetime, until: str | None, max_hours: float | None,
               window: str | None) -> list[tuple[datetime, str]]:
    """Each deadline asked for, with what set it: the next --until wall-clock time,
    `now + --max-hours`, the next end of --window."""
    found = []
    if until is not None:
        found.append((_next_at(now, parse_until(until)), f"--until {until.strip()}"))
    if max_hours is not None:
        # NaN, inf or 1e308 hours would mean "no deadline" or overflow the clock.
        if not math.isfinite(max_hours) or max_hours <= 0:
            raise InvalidInput(f"--max-hours {max_hours:g}: must be a positive, finite number")
        if max_hours > MAX_HOURS:
            raise InvalidInput(f"--max-hours {max_hours:g}: at most {MAX_HOURS:g} hours")
        found.append((now + timedelta(hours=max_hours), f"--max-hours {max_hours:g}"))
    if window is not None:
        found.append((_next_at(now, parse_window(window)[1]), f"window {window.strip()}"))
    return found


def _next_at(now: datetime, hour_minute: tuple[int, int]) -> datetime:
    """The first time after `now` that the local clock reads HH:MM."""
    at = now.replace(hour=hour_minute[0], minute=hour_minute[1], second=0, microsecond=0)
    return at if at > now else at + timedelta(days=1)


def past(deadline: datetime | None, now: datetime) -> bool:
    return deadline is not None and now >= deadline


def next_step(rows: Sequence[Row], policy: RetryPolicy) -> Step:
    """The one next step of the night loop. Pure. The journal's legal moves are the night
    folder's (`measure.nightfolder.transitions`); what runs next also depends on the
    campaign's retry policy, so it is decided here. In order: interrupt a stale `running`
    row; retry the earliest interrupted slot the policy allows; launch the earliest
    `planned` row (a confirmation rerun only once no planned control is left); else done."""
    ordered = sorted(rows, key=lambda r: (r.plan_index, r.attempt))
    for row in ordered:
        if row.state == State.RUNNING:
            return Step("interrupt", row)
    latest = latest_attempts(ordered)
    for plan_index in sorted(latest):
        row = latest[plan_index]
        if retry_allowed(policy, row.state, row.attempt):
            return Step("retry", row)
    planned = [latest[i] for i in sorted(latest) if latest[i].state == State.PLANNED]
    if planned:  # min keeps the first of equals: plan order among controls, among reruns
        return Step("launch", min(planned, key=lambda r: r.origin == RERUN))
    return Step("done")


def slot_final(row: Row, policy: RetryPolicy) -> bool:
    """True when this newest attempt of a slot will not run again on its own."""
    if row.state in TERMINAL:
        return True
    return row.state == State.INTERRUPTED and not retry_allowed(policy, row.state, row.attempt)


def spent(rows: Sequence[Row], policy: RetryPolicy) -> list[Row]:
    """Slots whose newest attempt was interrupted with no retry left: a resume skips them,
    `rerun --failed` runs them again. Pure."""
    return [r for r in latest_attempts(rows).values()
            if r.state == State.INTERRUPTED and not retry_allowed(policy, r.state, r.attempt)]


def retried(rows: Sequence[Row], policy: RetryPolicy) -> frozenset[str]:
    """Run ids of interrupted newest attempts that starting the night again retries. Pure."""
    return frozenset(str(r.run_id) for r in latest_attempts(rows).values()
                     if r.run_id and retry_allowed(policy, r.state, r.attempt))


def unfinished(rows: Sequence[Row], policy: RetryPolicy, *, ended: bool) -> bool:
    """Continue this night? Not once it ended on purpose; else while a slot can run."""
    if ended:
        return False
    return any(not slot_final(r, policy) for r in latest_attempts(rows).values())


def judged_attempts(rows: Iterable[Row]) -> dict[int, Row]:
    """Each slot's attempt its outcome is judged by: the newest, unless that is a rerun never
    started, which says nothing of the slot. Pure."""
    started = [r for r in rows if not (r.origin == RERUN and r.state == State.PLANNED)]
    return latest_attempts(started)


def night_exit_code(rows: Sequence[Row]) -> int:
    """0 when every slot's newest judged attempt is accepted; 3 when any was deferred or
    its exit class is 3 (only the catalogue makes a reason one, never a post-step's text);
    else 1. An unstarted confirmation rerun never changes it (`judged_attempts`)."""
    latest = list(judged_attempts(rows).values())
    if any(r.state == State.DEFERRED or r.exit_class == ENVIRONMENT for r in latest):
        return ENVIRONMENT
    if all(r.state == State.ACCEPTED for r in latest):
        return OK
    return REFUSED

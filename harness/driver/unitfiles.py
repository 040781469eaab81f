"""Unit text for running a campaign night on a schedule: a systemd user timer, or cron.

Pure, so it can be tested and `systemd-analyze verify`ed. The timer (Persistent=true runs
a missed night at boot) is recommended, cron the fallback. A night given an end runs with
`--window START-END` so a late start cannot hold the GPU through the day; exit codes 1
and 3 mark the unit failed, on purpose (docs/scheduling.md)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.driver.night.rules import MAX_HOURS, parse_until

_SAFE_ARG = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_UNIT = re.compile(r"[A-Za-z0-9:_.@%\\-]+\.(?:service|target)")
_CALENDAR = re.compile(rf"(?:(?P<dow>{_DOW}(?:(?:\.\.|,){_DOW})*) )?(?P<every>\*-\*-\* )?"
                       r"(?P<h>\d{1,2}):(?P<m>\d{2})(?::00)?")


@dataclass(frozen=True)
class Units:
    name: str  # unit base name, e.g. harness-night-rehearsal-night
    service: str
    timer: str
    cron: str | None  # None when the calendar has no plain cron equivalent


def unit_name(campaign: str) -> str:
    """A systemd unit name for the campaign's night (unit names allow [A-Za-z0-9:_.\\-])."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", campaign).strip("-.") or "campaign"
    return f"harness-night-{safe}"


def _no_newlines(what: str, value: str) -> None:
    if any(c in value for c in "\r\n\0"):
        raise InvalidInput(f"{what} must not contain line breaks or NUL: {value!r}")


def systemd_arg(arg: str) -> str:
    """One ExecStart= word: quoted when needed, with systemd's % and $ expansion escaped."""
    _no_newlines("a command argument", arg)
    text = arg.replace("%", "%%").replace("$", "$$")
    if _SAFE_ARG.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_path(path: str) -> str:
    """A path setting such as WorkingDirectory= (no quoting there; only % is special)."""
    _no_newlines("a path", path)
    return path.replace("%", "%%")


def render_service(name: str, argv: Sequence[str], workdir: str, campaign: str,
                   runs_dir: str | None = None, on_failure: str | None = None) -> str:
    """The oneshot service that runs one night and exits with the night's exit code."""
    _no_newlines("the campaign name", campaign)
    about = [f"# The morning report: {systemd_path(runs_dir)}/nights/"
             f"{campaign.replace('%', '%%')}-<UTC stamp>/summary.md (.html, .json)"
             ] if runs_dir else []
    return "\n".join([
        *about,
        f"# The night's log: journalctl --user -u {name}.service",
        "# Exit 1 (a run refused or failed, a start outside --window) and 3 (environment)",
        "# mark the unit failed: systemctl --user --failed lists it.",
        "[Unit]",
        f"Description=harness campaign night: {campaign.replace('%', '%%')}",
        *([f"OnFailure={on_failure}"] if on_failure else []),
        "",
        "[Service]",
        "Type=oneshot",
        f"WorkingDirectory={systemd_path(workdir)}",
        "ExecStart=" + " ".join(systemd_arg(a) for a in argv),
        # Plain JSON lines, one per event, land in the journal unbuffered.
        "Environment=PYTHONUNBUFFERED=1",
        # A night may take hours; stopping it gives the harness time to record the run.
        "TimeoutStartSec=infinity",
        "KillMode=mixed",
        "TimeoutStopSec=120",
        "",
    ])


def render_timer(name: str, on_calendar: str, campaign: str) -> str:
    _no_newlines("--on-calendar", on_calendar)
    return "\n".join([
        "[Unit]",
        f"Description=harness campaign night timer: {campaign.replace('%', '%%')}",
        "",
        "[Timer]",
        f"OnCalendar={on_calendar}",
        "Persistent=true",
        f"Unit={name}.service",
        "",
        "[Install]",
        "WantedBy=timers.target",
        "",
    ])


def _once_a_day(calendar: str) -> tuple[str | None, bool, int, int] | None:
    """(weekdays, spelled `*-*-*`, hour, minute) of a calendar firing at one time of day."""
    text = calendar.strip()
    if text in ("daily", "*-*-* 00:00:00"):
        return None, True, 0, 0
    m = _CALENDAR.fullmatch(text)
    if m is None or int(m["h"]) > 23 or int(m["m"]) > 59:
        return None
    return m["dow"], bool(m["every"]), int(m["h"]), int(m["m"])


def cron_schedule(on_calendar: str) -> str | None:
    """The cron fields for simple daily/weekday calendars (normalized form), else None."""
    fires = _once_a_day(on_calendar)
    if fires is None or not fires[1]:
        return None
    return f"{fires[3]} {fires[2]} * * {(fires[0] or '*').replace('..', '-')}"


def cron_line(on_calendar: str, argv: Sequence[str], workdir: str) -> str | None:
    fields = cron_schedule(on_calendar)
    if fields is None:
        return None
    command = f"cd {shlex.quote(workdir)} && " + " ".join(shlex.quote(a) for a in argv)
    _no_newlines("the cron command", command)
    return f"{fields} {command.replace('%', chr(92) + '%')}"


def calendar_start(calendar: str) -> tuple[int, int] | None:
    """The one time of day a calendar fires at, or None (none, or several). Pure."""
    fires = _once_a_day(calendar)
    return None if fires is None else (fires[2], fires[3])


def night_window(calendar: str, until: str | None, max_hours: float | None,
                 shown: str | None = None) -> str | None:
    """The `--window START-END` a scheduled night runs with, from the calendar's time of
    day to --until or START + --max-hours (under a day); None without an end. Pure."""
    if until is None and (max_hours is None or max_hours >= 24):
        return None
    start = calendar_start(calendar)
    if start is None:
        raise InvalidInput(
            f"--on-calendar {shown or calendar!r} has no single time of day, so the night's window "
            "cannot start there: use one such as \"*-*-* 02:00\" or \"Mon..Fri 01:30\" with "
            "--until/--max-hours (a night the timer starts late, at boot, keeps to its window)")
    if until is not None:
        end = parse_until(until)
    else:
        minutes = (start[0] * 60 + start[1] + round(max_hours * 60)) % (24 * 60)
        end = divmod(minutes, 60)
    if end == start:
        raise InvalidInput(f"the window {start[0]:02d}:{start[1]:02d}-{until} would be empty: "
                           "--until is the calendar's own time")
    return f"{start[0]:02d}:{start[1]:02d}-{end[0]:02d}:{end[1]:02d}"


def night_argv(harness: Sequence[str], campaign_file: str, *, runs_dir: str | None = None,
               window: str | None = None, until: str | None = None,
               max_hours: float | None = None) -> list[str]:
    """The `harness night` command the unit (and the cron line) runs. Pure."""
    argv = [*harness, "night", campaign_file]
    if runs_dir is not None:
        argv += ["--runs-dir", runs_dir]
    if window is not None:
        argv += ["--window", window]
    elif until is not None:
        argv += ["--until", until]
    if max_hours is not None:
        argv += ["--max-hours", f"{max_hours:g}"]
    return argv


def check_on_failure(unit: str | None) -> None:
    if unit is not None and not _UNIT.fullmatch(unit):
        raise InvalidInput(f"--on-failure {unit!r}: expected a unit name such as "
                           "notify-failure@%n.service")


def render_units(campaign: str, campaign_file: str, on_calendar: str, harness: Sequence[str],
                 workdir: str, normalized: str | None = None, *, runs_dir: str | None = None,
                 until: str | None = None, max_hours: float | None = None,
                 on_failure: str | None = None) -> Units:
    """Everything `harness schedule` prints, from resolved absolute paths. Pure.
    `normalized`: systemd's form of the calendar, which cron and the window are judged on."""
    name = unit_name(campaign)
    if until is not None:
        parse_until(until)
    if max_hours is not None and not (0 < max_hours <= MAX_HOURS):
        raise InvalidInput(f"--max-hours {max_hours:g}: between 0 and {MAX_HOURS:g} hours")
    check_on_failure(on_failure)
    window = night_window(normalized or on_calendar, until, max_hours, on_calendar)
    argv = night_argv(harness, campaign_file, runs_dir=runs_dir, window=window, until=until,
                      max_hours=max_hours)
    return Units(name, render_service(name, argv, workdir, campaign, runs_dir, on_failure),
                 render_timer(name, on_calendar, campaign),
                 cron_line(normalized or on_calendar, argv, workdir))


def default_harness() -> list[str]:
    """How to start this harness from a unit: its console script, else this Python -m harness."""
    found = shutil.which("harness")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "harness"]


def check_calendar(expr: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
                   ) -> str | None:
    """systemd's normalized form of `expr` (None without systemd-analyze); InvalidInput
    when systemd rejects it."""
    _no_newlines("--on-calendar", expr)
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return None
    done = run([tool, "calendar", expr], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise InvalidInput(f"--on-calendar {expr!r} is not a systemd calendar expression"
                           + (f": {why[-1]}" if why else ""))
    for line in done.stdout.splitlines():
        if line.strip().startswith("Normalized form:"):
            return line.split(":", 1)[1].strip()
    return expr

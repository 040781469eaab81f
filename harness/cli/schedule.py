"""`harness schedule CAMPAIGN --on-calendar EXPR`: a systemd user timer, or a cron line."""

from __future__ import annotations

import os
from pathlib import Path

import click

from harness.base.atomic import write_text
from harness.base.errors import InvalidInput
from harness.cli.jsonout import as_json_errors, emit, json_option
from harness.cli.params import HOURS
from harness.config.checkout import project_of
from harness.config.runsdir import resolve
from harness.driver.unitfiles import Units, check_calendar, default_harness, render_units
from harness.readers.report.nights import campaign_name


def user_unit_dir() -> Path:
    """Where the user's systemd looks for units ($XDG_CONFIG_HOME/systemd/user)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def _install(units: Units, service_path: Path, timer_path: Path, force: bool,
             say: bool = True) -> None:
    # the unit files already there (a symlink counts: systemd would read it)
    present = [p for p in (service_path, timer_path) if os.path.lexists(p)]
    if present and not force:
        raise InvalidInput(
            f"{present[0]} exists: a timer for this campaign is installed; nothing was "
            "written (give --force to replace it, or compare it with the text printed "
            "without --install)")
    service_path.parent.mkdir(parents=True, exist_ok=True)
    write_text(service_path, units.service)
    write_text(timer_path, units.timer)
    if not say:
        return
    for path in (service_path, timer_path):
        click.echo(f"{'replaced' if path in present else 'wrote'} {path}")
    click.echo("now run:")
    click.echo(f"  systemctl --user daemon-reload && systemctl --user enable --now "
               f"{units.name}.timer")
    click.echo("and, so the timer fires while you are logged out:")
    click.echo("  loginctl enable-linger \"$USER\"")


@click.command("schedule")
@click.argument("campaign", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--on-calendar", required=True,
              help='systemd calendar expression, e.g. "*-*-* 02:00" or "Mon..Fri 01:30".')
@click.option("--until", metavar="HH:MM",
              help="local time the night's window closes: no control starts after it, and a "
                   "night started late (at boot) outside the window starts nothing")
@click.option("--max-hours", type=HOURS,
              help="hours after which no control starts (under 24: also the window's length)")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="run folders; the report lands in RUNS_DIR/nights/ (relative to "
                   "--workdir when given, else to the current folder; default, as `harness "
                   "night` finds it: $HARNESS_RUNS_DIR, else runs_dir in the campaign "
                   "project's harness.toml, else gpu-runs/ in the campaign's project "
                   "folder); the unit gets it as an absolute path")
@click.option("--on-failure", metavar="UNIT",
              help="add OnFailure=UNIT to the service (e.g. a mail unit) for nights that "
                   "exit 1 or 3")
@click.option("--install", is_flag=True,
              help="Write the units under ~/.config/systemd/user/ (does not run systemctl).")
@click.option("--force", is_flag=True, help="with --install: replace an installed timer")
@click.option("--harness", "harness_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The harness executable the unit runs (default: this one).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Folder the night runs in; default: the campaign's project folder (the "
                   "folder above campaigns/).")
@json_option("ok, exit_code, unit, service, timer, service_path, timer_path, installed, "
             "cron, report, log")
def schedule(campaign: Path, on_calendar: str, until: str | None, max_hours: float | None,
             runs_dir: Path | None, on_failure: str | None, install: bool, force: bool,
             harness_path: Path | None, workdir: Path | None, as_json: bool) -> None:
    """Print a systemd user service + timer (Persistent=true) that runs `harness night
    CAMPAIGN`, and a cron line as an alternative. With --install, write the units; an
    installed timer is replaced only with --force (else exit 2).

    With --until (or --max-hours under 24) the night gets --window, so a night the timer
    catches up at boot after the window has closed starts nothing (docs/scheduling.md).
    """
    with as_json_errors(as_json, campaign=str(campaign)):
        name = campaign_name(campaign)
        normalized = check_calendar(on_calendar)
        if normalized is None:
            click.echo("harness: systemd-analyze not found; --on-calendar was not checked",
                       err=True)
        harness = [str(harness_path.absolute())] if harness_path else default_harness()
        here = (workdir or Path.cwd()).absolute()  # where a relative --runs-dir is read from
        runs = resolve(runs_dir, cwd=here, campaign=campaign).path  # as `harness night` would
        work = workdir.absolute() if workdir else project_of(Path(os.path.abspath(campaign)))
        units = render_units(
            campaign=name, campaign_file=str(campaign.absolute()), on_calendar=on_calendar,
            harness=harness, workdir=str(work), normalized=normalized, runs_dir=str(runs),
            until=until, max_hours=max_hours, on_failure=on_failure)
        unit_dir = user_unit_dir()
        service_path = unit_dir / f"{units.name}.service"
        timer_path = unit_dir / f"{units.name}.timer"
        if until is None and max_hours is None:
            click.echo("harness: no --until/--max-hours: a night the timer catches up at boot "
                       "runs to its end, whatever the hour", err=True)
        if install:
            _install(units, service_path, timer_path, force, say=not as_json)
    report = f"{runs}/nights/{name}-<UTC stamp>/summary.md"
    log = f"journalctl --user -u {units.name}.service"
    if as_json:
        emit({"ok": True, "exit_code": 0, "unit": units.name, "service": units.service,
              "timer": units.timer, "service_path": str(service_path),
              "timer_path": str(timer_path), "installed": install, "cron": units.cron or None,
              "report": report, "log": log})
        return
    if not install:
        _print(units, service_path, timer_path, on_calendar)
    click.echo(f"report: {report} (and .html, .json)")
    click.echo(f"log: {log}")


def _print(units: Units, service_path: Path, timer_path: Path, on_calendar: str) -> None:
    click.echo(f"# {service_path}")
    click.echo(units.service)
    click.echo(f"# {timer_path}")
    click.echo(units.timer)
    click.echo("# cron alternative (crontab -e); unlike the timer it does not catch up "
               "on a missed night:")
    if units.cron:
        click.echo(units.cron)
    else:
        click.echo(f"# OnCalendar={on_calendar} has no plain cron equivalent; write the "
                   "five time fields by hand before:")
        click.echo("# " + units.service.split("ExecStart=", 1)[1].split("\n", 1)[0])

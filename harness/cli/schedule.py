"""`harness schedule CAMPAIGN --on-calendar EXPR`: a systemd user timer, or a cron line."""

from __future__ import annotations

import os
from pathlib import Path

import click

from harness.atomic import write_text
from harness.report.nights import campaign_name
from harness.schedule import check_calendar, default_harness, render_units


def user_unit_dir() -> Path:
    """Where the user's systemd looks for units ($XDG_CONFIG_HOME/systemd/user)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


@click.command("schedule")
@click.argument("campaign", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--on-calendar", required=True,
              help='systemd calendar expression, e.g. "*-*-* 02:00" or "Mon..Fri 01:30".')
@click.option("--install", is_flag=True,
              help="Write the units under ~/.config/systemd/user/ (does not run systemctl).")
@click.option("--harness", "harness_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The harness executable the unit runs (default: this one).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Folder the night runs in (its ./gpu-runs); default: the current folder.")
def schedule(campaign: Path, on_calendar: str, install: bool, harness_path: Path | None,
             workdir: Path | None) -> None:
    """Print a systemd user service + timer (Persistent=true) that runs `harness night
    CAMPAIGN`, and a cron line as an alternative. With --install, write the units."""
    name = campaign_name(campaign)
    normalized = check_calendar(on_calendar)
    if normalized is None:
        click.echo("harness: systemd-analyze not found; --on-calendar was not checked", err=True)
    harness = [str(harness_path.absolute())] if harness_path else default_harness()
    units = render_units(
        campaign=name,
        campaign_file=str(campaign.absolute()),
        on_calendar=on_calendar,
        harness=harness,
        workdir=str((workdir or Path.cwd()).absolute()),
        normalized=normalized,
    )
    unit_dir = user_unit_dir()
    service_path = unit_dir / f"{units.name}.service"
    timer_path = unit_dir / f"{units.name}.timer"
    if install:
        unit_dir.mkdir(parents=True, exist_ok=True)
        write_text(service_path, units.service)
        write_text(timer_path, units.timer)
        click.echo(f"wrote {service_path}")
        click.echo(f"wrote {timer_path}")
        click.echo("now run:")
        click.echo(f"  systemctl --user daemon-reload && systemctl --user enable --now "
                   f"{units.name}.timer")
        click.echo("and, so the timer fires while you are logged out:")
        click.echo("  loginctl enable-linger \"$USER\"")
        return
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
        click.echo("# " + " ".join(harness) + f" night {campaign.absolute()}")

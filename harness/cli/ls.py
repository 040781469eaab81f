"""`harness ls`: the runs (or nights) in the runs dir, newest first (the rows are
harness.readers.listing)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from harness.base.errors import InvalidInput
from harness.base.states import STATUSES
from harness.base.terminal import paint_statuses
from harness.cli.params import (
    BoundedParam,
    color_option,
    default_lock,
    lock_option,
    parse_duration,
    runs_dir_option,
)
from harness.readers.listing import (
    LISTING_WORDS,
    as_json,
    read_night_rows,
    read_rows,
    render,
    render_nights,
    select,
)
from harness.readers.report.runline import stamp_time

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?")


def parse_since(text: str, now: datetime) -> datetime:
    """`--since`: a duration back from `now` (90s, 30m, 2h, 3d) or a UTC date or time
    (2026-12-01, 2026-12-01T02:00Z). Pure; ValueError otherwise."""
    try:
        if _DATE.fullmatch(text):
            return datetime.fromisoformat(text.removesuffix("Z")).replace(tzinfo=UTC)
        return now - timedelta(seconds=parse_duration(text))
    except ValueError as e:
        raise ValueError(f"{e}; or a UTC date such as 2026-12-01") from None


SINCE = BoundedParam("since", lambda value: parse_since(str(value), datetime.now(UTC)))


@click.command("ls")
@runs_dir_option("reads", help="the runs dir to list")
@click.option("--campaign", metavar="NAME", help="only this campaign's runs")
@click.option("--control", metavar="NAME", help="only this control's runs")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice([*STATUSES, *LISTING_WORDS]),
              help="only runs with this status (repeatable)")
@click.option("--since", type=SINCE, metavar="WHEN",
              help="only runs started since: a duration back (2h, 3d) or a UTC date or "
                   "time (2026-12-01, 2026-12-01T02:00Z)")
@click.option("-n", "--last", type=click.IntRange(1, 1_000_000), metavar="N",
              help="only the N newest runs (after the other filters)")
@click.option("--json", "as_json_out", is_flag=True,
              help="a JSON list of objects: run_id, control, campaign, status, started, "
                   "ended, duration_s, attempt, rerun_of, superseded_by, path")
@click.option("-q", "--quiet", is_flag=True, help="print the run ids only, one a line")
@click.option("--nights", is_flag=True,
              help="list the nights (RUNS_DIR/nights) instead: night id, campaign, state "
                   "(running, done, interrupted), started, controls accepted/total, how many "
                   "final attempts came after a retry or a rerun; --json adds the path")
@lock_option("with --nights: the GPU lock whose night lock names the running night "
             "(default: $HOME/gpu.lock)")
@color_option()
def ls(runs_dir: Path, campaign: str | None, control: str | None, statuses: tuple[str, ...],
       since: datetime | None, last: int | None, as_json_out: bool, quiet: bool,
       nights: bool, lock_path: Path | None) -> None:
    """List the runs in the runs dir, newest first, as `docker ps -a` lists containers.

    Each status is the one its sealed run.json records (hash checked); a folder is never
    left out: `running` (its harness is alive), `unsealed`, `unreadable` or `not-intact`
    say why. Any id shown, a unique prefix of one, `latest` or `@-1` works in show, diff,
    verify, rerun, refinalize and bundle export; a night id or prefix (`ls --nights`) in
    show, report, verify, bundle export and `rerun --failed`.

    Exit 0 (also when no run matches); 2 when the runs dir is missing or unreadable.
    """
    if nights and (control is not None or statuses):
        raise click.UsageError("--control and --status list runs; --nights lists nights")
    try:
        rows = read_night_rows(runs_dir, lock_path or default_lock()) if nights else \
            read_rows(runs_dir)
    except OSError as e:
        what = "the nights of" if nights else "the runs dir"
        raise InvalidInput(f"cannot read {what} {runs_dir}: {e.strerror or e}") from None
    if nights:  # a night whose name has no time is never left out by --since
        chosen = [r for r in rows if (campaign is None or r.campaign == campaign) and (
            since is None or (stamp_time(r.started) or since) >= since)][:last]
    else:
        chosen = select(rows, campaign=campaign, control=control, status=statuses,
                        since=since, last=last)
    if as_json_out:
        click.echo(as_json(chosen))
    elif quiet:
        for row in chosen:  # a folder name in the safe alphabet (refs.run_parts, night_parts)
            click.echo(row.night_id if nights else row.run_id)
    else:
        for line in (render_nights if nights else render)(chosen, datetime.now(UTC)):
            click.echo(paint_statuses(line))

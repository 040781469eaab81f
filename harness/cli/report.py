"""`harness report CAMPAIGN|NIGHT`: print a night's morning summary: a table on a
terminal, Markdown piped, any form with -o (HTML never on a terminal)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from harness.base.atomic import write_text
from harness.base.errors import InvalidInput
from harness.base.terminal import isatty, paint_statuses
from harness.cli.params import NIGHT, color_option, runs_dir_option
from harness.config.runsdir import RunsDir, require_existing
from harness.readers.report.morning import (
    FORMATS,
    SUFFIXES,
    render,
    summary_for_campaign,
    summary_for_night,
)
from harness.readers.report.nights import campaign_name


def chosen_format(fmt: str | None, output: Path | None, tty: bool) -> str:
    """The form to write: the one asked for; else the output file's suffix (Markdown for
    another); else a table on a terminal and Markdown through a pipe. Pure. HTML for a
    terminal is refused (UsageError, exit 2): 400 KB of markup is nobody's reading."""
    if fmt is None:
        if output is not None:
            fmt = SUFFIXES.get(output.suffix.lower(), "md")
        else:
            fmt = "table" if tty else "md"
    if fmt == "html" and output is None and tty:
        raise click.UsageError("--format html is a page for a browser: write it with "
                               "-o FILE.html (and open that), or pipe it")
    return fmt


def _write(output: Path, text: str) -> None:
    if output.is_dir():
        raise InvalidInput(f"-o {output}: is a folder; name a file")
    if not output.parent.is_dir():
        raise InvalidInput(f"-o {output}: no such folder {output.parent}")
    write_text(output, text)


@click.command("report")
@click.argument("target", metavar="CAMPAIGN|NIGHT")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="table (fixed columns, for a terminal), Markdown, a self-contained HTML "
                   "page with plots, JSON, or CSV (one line per run and figure: the columns "
                   "of RUNS_DIR/perflog/<campaign>.csv). Default: a table on a terminal, "
                   "Markdown when piped; with -o, from FILE's suffix (else Markdown).")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="write the report to FILE (atomically) and print its path")
@runs_dir_option("lazy", help="Where nights are found by id or campaign "
                 "(RUNS_DIR/nights/<campaign>-<stamp>/)", campaign="target")
@color_option()
def report(target: str, fmt: str | None, output: Path | None, runs_dir: RunsDir) -> None:
    """Report a night: per control its status, verdict and reasons, lock wait and hold,
    duration, exit code and vLLM metrics, with links to each run's folder and logs.

    NIGHT is a night id, a unique prefix of one, `latest` or `@-1` (`harness ls
    --nights`), or a night folder; CAMPAIGN a campaign file (its latest night). A
    row that did not end accepted carries its Gate-0 values and the `harness rerun` /
    `harness diff` commands to go on (docs/report.md). On a terminal a table; piped,
    Markdown; -o FILE writes the chosen format there (HTML on a terminal without -o: exit
    2).
    """
    fmt = chosen_format(fmt, output, isatty(sys.stdout))
    night = NIGHT.convert(target, None, click.get_current_context())  # a path stays as given
    if night.is_dir():
        summary = summary_for_night(night)
    else:
        campaign_name(night)  # a campaign that cannot be read is named before the runs dir
        summary = summary_for_campaign(night, require_existing(runs_dir))
    text = render(summary, fmt, width=shutil.get_terminal_size((100, 24)).columns)
    if output is None:
        click.echo(paint_statuses(text) if fmt == "table" else text, nl=False)
        return
    _write(output, text)
    click.echo(str(output))

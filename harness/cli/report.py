"""`harness report CAMPAIGN|NIGHT_DIR`: print a night's morning summary."""

from __future__ import annotations

from pathlib import Path

import click

from harness.readers.report.morning import FORMATS, render, summary_for_campaign, summary_for_night


@click.command("report")
@click.argument("target", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="md", show_default=True,
              help="Markdown, a self-contained HTML page with plots, JSON, or CSV (one line "
                   "per run and figure: the columns of RUNS_DIR/perflog/<campaign>.csv).")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("gpu-runs"), show_default=True,
              help="Where a campaign's nights live (RUNS_DIR/nights/<campaign>-<stamp>/).")
def report(target: Path, fmt: str, runs_dir: Path) -> None:
    """Report a night: per control its status, verdict and reasons, lock wait and hold,
    duration, exit code and the vLLM metrics it has (marked where outside the control's
    reference), with links to each run's folder and logs and, in HTML, plots across the
    campaign's nights.

    TARGET is a night folder, or a campaign file (its latest night under --runs-dir).
    """
    if target.is_dir():
        summary = summary_for_night(target)
    else:
        summary = summary_for_campaign(target, runs_dir)
    click.echo(render(summary, fmt), nl=False)

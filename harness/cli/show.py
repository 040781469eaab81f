"""`harness show`: a readable summary of a run folder, a night or a gate record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from harness.base.errors import InvalidInput
from harness.base.terminal import paint_statuses
from harness.cli.params import REFS_RUNS_DIR, RUN_OR_NIGHT, Named, color_option
from harness.judge.gaterecord import gatelines as gate_show
from harness.measure.runfolder.inputs import KEPT
from harness.measure.runfolder.sealed import read_record
from harness.readers.report.inert import inert
from harness.readers.runview import input_text, render_run


def strict_json(doc: object, where: Path) -> str:
    """A record as JSON any reader accepts: ASCII, so no control or bidi character reaches
    the terminal raw, and never NaN or Infinity, which Python's reader let into the record
    but JSON has no form for (InvalidInput, exit 2)."""
    try:
        return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False)
    except ValueError:
        raise InvalidInput(f"{where}: the record holds NaN or Infinity, which JSON has no "
                           "form for") from None


@click.command()
@click.argument("target", type=RUN_OR_NIGHT)
@REFS_RUNS_DIR
@click.option("--json", "as_json", is_flag=True, help="print run.json as is (a night: its summary "
              "as JSON, as in its summary.json)")
@click.option("--input", "input_name", type=click.Choice(list(KEPT)), default=None,
              help="print one file the run kept in inputs/ whole, each line inert: the "
                   "campaign or control YAML as sealed, the resolved documents, or the "
                   "images.lock entry")
@color_option()
def show(target: Named, as_json: bool, input_name: str | None) -> None:
    """Print a readable summary of a sealed run, of a night, or of a gate record.

    A run is read through the one verified reader, so a folder never sealed or failing
    verification is not shown as a record. RUN may be a run id, a unique prefix, `latest`
    or `@-1` (`harness ls`), or its folder; a night its id or a unique prefix (`harness ls
    --nights`), or its folder: its summary as `harness report` prints it. The "inputs"
    lines list what the run kept in inputs/ (campaign and control YAML as sealed,
    resolved.json, image.json); --input NAME prints one whole.

    Exit codes: 0 shown; 1 not sealed or not intact (`harness verify` names every
    problem); 2 not a run record, --input names a file the run did not keep, or --json
    of a record holding NaN or Infinity (no JSON).
    """
    run_dir = target.path
    other = "a night" if target.is_night else \
        "a gate record" if gate_show.is_gate_record(run_dir) else None
    if input_name is not None and other is not None:
        raise click.UsageError(f"--input is for a run folder; {other} keeps no inputs")
    if target.is_night:
        from harness.readers.report.morning import render, summary_for_night  # heavy: here

        summary = summary_for_night(run_dir)
        text = render(summary, "json" if as_json else "table",
                      width=shutil.get_terminal_size((100, 24)).columns)
        click.echo(text if as_json else paint_statuses(text), nl=False)
        return
    if other is not None:
        doc = gate_show.read(run_dir)  # exit 2 for anything but a v1 gate record
        lines = [strict_json(doc, run_dir)] if as_json else gate_show.render(run_dir, doc, inert)
        click.echo("\n".join(lines))
        return
    record = read_record(run_dir)  # verified (exit 1 otherwise), a run record (exit 2)
    if input_name is not None:  # exit 2 when the run did not keep it (older runs)
        click.echo("\n".join(input_text(run_dir, input_name)))
        return
    if as_json:
        click.echo(strict_json(record.raw, run_dir))
    else:
        render_run(run_dir, record)

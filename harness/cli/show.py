"""`harness show`: a readable summary of a run folder or gate record."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.cli.params import RUN
from harness.judge.gates import show as gate_show
from harness.measure.runfolder.inputs import KEPT
from harness.measure.runfolder.sealed import read_record
from harness.readers.report.inert import inert
from harness.readers.show import input_text, render_run


@click.command()
@click.argument("run_dir", type=RUN)
@click.option("--json", "as_json", is_flag=True, help="print run.json as is")
@click.option("--input", "input_name", type=click.Choice(list(KEPT)), default=None,
              help="print one file the run kept in inputs/ whole, each line inert: the "
                   "campaign or control YAML as sealed, the resolved documents, or the "
                   "images.lock entry")
def show(run_dir: Path, as_json: bool, input_name: str | None) -> None:
    """Print a readable summary of a sealed run folder (or of a gate record: `harness gates`).

    The run is read through the one verified reader: a folder never sealed or failing
    verification (a file changed, missing or added after the seal) is not shown as a
    record. RUN_DIR may be a run id, a unique prefix of one, `latest` or `@-1`, looked up
    in the runs dir (`harness ls`). Exit codes: 0 shown; 1 not sealed or not intact (RUN-UNSEALED,
    RUN-NOT-INTACT; `harness verify` names every problem); 2 run.json is not a run record,
    or `--input` names a file the run did not keep.

    The "inputs" lines list what the run was made from, kept in its folder at preflight and
    sealed with it: the campaign and control YAML as the source seal hashed them, both as
    resolved (resolved.json) and the images.lock entry (image.json); `--input NAME` prints
    one whole. Runs made before the harness kept its inputs say "not kept".
    """
    if gate_show.is_gate_record(run_dir):
        if input_name is not None:
            raise click.UsageError("--input is for a run folder; a gate record keeps no inputs")
        doc = gate_show.read(run_dir)  # exit 2 for anything but a v1 gate record
        lines = [json.dumps(doc, indent=2, sort_keys=True)] if as_json else \
            gate_show.render(run_dir, doc, inert)
        click.echo("\n".join(lines))
        return
    record = read_record(run_dir)  # verified (exit 1 otherwise), a run record (exit 2)
    if input_name is not None:  # exit 2 when the run did not keep it (older runs)
        click.echo("\n".join(input_text(run_dir, input_name)))
        return
    if as_json:
        click.echo(json.dumps(record.raw, indent=2, sort_keys=True))
    else:
        render_run(run_dir, record)

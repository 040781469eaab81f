"""`harness show`: a readable summary of a run folder or gate record."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.judge.gates import show as gate_show
from harness.measure.runfolder.sealed import read_record
from harness.readers.report.inert import inert
from harness.readers.show import render_run


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print run.json as is")
def show(run_dir: Path, as_json: bool) -> None:
    """Print a readable summary of a sealed run folder (or of a gate record: `harness gates`).

    The run is read through the one verified reader: a folder never sealed or failing
    verification (a file changed, missing or added after the seal) is not shown as a
    record. Exit codes: 0 shown; 1 not sealed or not intact (RUN-UNSEALED,
    RUN-NOT-INTACT; `harness verify` names every problem); 2 run.json is not a run record.
    """
    if gate_show.is_gate_record(run_dir):
        doc = gate_show.read(run_dir)  # exit 2 for anything but a v1 gate record
        lines = [json.dumps(doc, indent=2, sort_keys=True)] if as_json else \
            gate_show.render(run_dir, doc, inert)
        click.echo("\n".join(lines))
        return
    record = read_record(run_dir)  # verified (exit 1 otherwise), a run record (exit 2)
    if as_json:
        click.echo(json.dumps(record.raw, indent=2, sort_keys=True))
    else:
        render_run(run_dir, record)

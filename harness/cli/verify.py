"""`harness verify`: re-hash a sealed run folder or gate record."""

from __future__ import annotations

import os
from pathlib import Path

import click

from harness.base.errors import InvalidInput
from harness.cli.jsonout import as_json_errors, emit
from harness.cli.nightverify import problem_doc, verify_night
from harness.cli.params import REFS_RUNS_DIR, RUN_OR_NIGHT, Named
from harness.cli.targets import refuse_bundle
from harness.judge.gaterecord.gatesjson import GATE_RECORD
from harness.measure.runfolder.layout import RECORD, SUMS
from harness.measure.runfolder.manifest import verify_folder


def sealed_folder(run_dir: Path) -> Path:
    """The folder to verify, or InvalidInput (exit 2) when it is not a folder, or is one
    with none of run.json, gates.json and SHA256SUMS: a typo'd path, the runs folder
    itself, a night folder. A run whose SHA256SUMS alone is gone is tampered (exit 1)."""
    real = Path(os.path.realpath(run_dir))  # the operator's path; nothing inside is followed
    if not real.is_dir():
        raise InvalidInput(f"{run_dir}: not a folder")
    if not any(os.path.lexists(real / name) for name in (RECORD, GATE_RECORD, SUMS)):
        raise InvalidInput(f"{run_dir}: not a run folder or gate record (it holds no "
                           f"{RECORD}, {GATE_RECORD} or {SUMS})")
    return real


@click.command()
@click.argument("target", type=RUN_OR_NIGHT)
@REFS_RUNS_DIR
@click.option("--json", "as_json", is_flag=True,
              help="one JSON object on stdout: path, ok, exit_code, problems (or error)")
def verify(target: Named, as_json: bool) -> None:
    """Re-hash a sealed run folder (or gate record, or each run of a night folder).

    RUN may be a run id, a unique prefix, `latest` or `@-1` (`harness ls`), a night its id
    or a unique prefix (`harness ls --nights`), either one its folder. Exit 0 intact; 1
    naming each changed, missing or extra file; 2 when it is none of those (a bundle:
    `harness bundle verify`)."""
    run_dir = target.path
    with as_json_errors(as_json, path=str(run_dir)):
        refuse_bundle(run_dir)
    if target.is_night:
        raise click.exceptions.Exit(verify_night(run_dir, as_json))
    with as_json_errors(as_json, path=str(run_dir)):
        problems = verify_folder(sealed_folder(run_dir))
    code = 1 if problems else 0
    if as_json:
        emit({"path": str(run_dir), "ok": not problems, "exit_code": code,
              "problems": [problem_doc(p) for p in problems]})
    else:
        for p in problems:
            click.echo(f"{run_dir}/{p}", err=True)
        click.echo(f"FAILED: {len(problems)} problem(s) in {run_dir}" if problems
                   else f"OK: {run_dir} is intact")
    raise click.exceptions.Exit(code)

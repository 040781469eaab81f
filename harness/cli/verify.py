"""`harness verify`: re-hash a sealed run folder or gate record, or every run a night's
journal names, in one go.

A night's runs are the ones a bundle of the night would carry (harness.readers.bundle.nightruns:
each journal row's run id, found as a real folder RUNS/<run-id> beside the night, never a
path the journal wrote). One line per run, as `harness verify RUN_DIR` would end; a row
that names its run badly, or a run that is not there, is a failure too. A night folder
holds no seal of its own (its journal is written until the night ends), so it is only
the runs that are verified.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from harness.base.errors import InvalidInput
from harness.cli.jsonout import as_json_errors, emit, json_option
from harness.cli.params import REFS_RUNS_DIR, RUN_OR_NIGHT, Named, refuse_bundle
from harness.judge.gaterecord.gatesjson import GATE_RECORD
from harness.measure.runfolder.layout import RECORD, SUMS
from harness.measure.runfolder.manifest import SealFault, verify_folder
from harness.readers.report.inert import inert

MAX_SHOWN = 20  # problems printed per run of a night (`harness verify RUN_DIR` names all)


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


def problem_doc(p: SealFault) -> dict[str, str | None]:
    """One problem as `verify --json` says it, of a run or of each run of a night."""
    return {"path": p.path, "kind": p.kind, "detail": p.detail}


def _run_doc(folder: Path) -> dict[str, Any]:
    problems = verify_folder(folder)
    return {"run_id": folder.name, "path": str(folder), "ok": not problems,
            "problems": [problem_doc(p) for p in problems]}


def _say(night: Path, runs: list[dict[str, Any]], faults: list[str]) -> None:
    for run in runs:
        if run["ok"]:
            click.echo(f"OK: {inert(run['run_id'], 300)} is intact")
            continue
        click.echo(f"FAILED: {inert(run['run_id'], 300)}: {len(run['problems'])} problem(s)")
        for p in run["problems"][:MAX_SHOWN]:
            detail = f" ({p['detail']})" if p["detail"] else ""
            click.echo(inert(f"  {p['kind']}: {p['path']}{detail}", 2000), err=True)
    for fault in faults:
        click.echo(f"FAILED: {inert(fault, 2000)}")
    bad = sum(not r["ok"] for r in runs) + len(faults)
    click.echo(f"night {inert(str(night), 1000)}: {len(runs)} run(s), "
               + (f"{bad} failed" if bad else "all intact"))


def verify_night(night: Path, as_json: bool) -> int:
    """Verify the night's runs; 0 when every one is intact, 1 otherwise."""
    from harness.readers.bundle.nightruns import night_run_folders  # only for a night

    real = Path(os.path.realpath(night))
    folders, faults = night_run_folders(real, set())
    runs = [_run_doc(f) for f in folders]
    code = 1 if faults or not all(r["ok"] for r in runs) else 0
    if as_json:
        emit({"path": str(night), "night": True, "ok": code == 0, "exit_code": code,
              "runs": runs, "faults": faults})
    else:
        _say(night, runs, faults)
    return code


@click.command()
@click.argument("target", type=RUN_OR_NIGHT)
@REFS_RUNS_DIR
@json_option("path, ok, exit_code, problems")
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

"""`harness verify NIGHT_DIR`: re-hash every run a night's journal names, in one go.

The runs are the ones a bundle of the night would carry (harness.readers.bundle.nightruns:
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

from harness.cli.jsonout import emit
from harness.measure.runfolder.manifest import SealFault, verify_folder
from harness.readers.report.inert import inert

MAX_SHOWN = 20  # problems printed per run (`harness verify RUN_DIR` names all of them)


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

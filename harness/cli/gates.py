"""`harness gates CAMPAIGN [--runs-dir DIR] [--only NAME...]`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from harness.cli.jsonout import as_json_errors, emit, json_option
from harness.cli.params import runs_dir_option
from harness.config.loader import require_campaign
from harness.judge.gaterecord.gatelines import headline
from harness.probe.gaterun import run_gates
from harness.readers.report.inert import inert


def _line(entry: dict[str, Any]) -> None:
    status = "passed" if entry["passed"] else "FAILED"
    why = f": {inert(entry['why'], 2000)}" if entry["why"] else ""
    click.echo(f"{status}: {inert(entry['name'], 64)} ({entry['duration_s']:g} s){why}")


@click.command("gates")
@click.argument("campaign", type=click.Path(path_type=Path))
@runs_dir_option("creates", help="the record goes to DIR/gates/<campaign>-<UTC stamp>/",
                 campaign="campaign")
@click.option("--only", multiple=True, metavar="NAME",
              help="run only this gate (repeatable); the record lists only those run")
@json_option("record, ok, exit_code, verdict, campaign, source_seal, git, gates, refusals")
def gates(campaign: Path, runs_dir: Path, only: tuple[str, ...], as_json: bool) -> None:
    """Run the campaign's gates in order and write a sealed gate record.

    Each gate is an argv run without a shell in the project folder, its output folder in
    HARNESS_GATE_DIR and {gate_dir}; it passes on its expected exit code within its timeout
    and, where asked, its JUnit and mutation thresholds. The record is bound to the source
    seal and git state; only a complete record from a clean checkout can carry an approval
    (docs/approval.md).

    Exit codes: 0 every gate passed; 1 a gate failed or the source seal changed while they
    ran; 2 invalid campaign, gate list or --only; 3 a gate could not be started or the
    record not written; 130 Ctrl-C (the record of what ran is still sealed, as FAILED).
    """
    with as_json_errors(as_json, campaign=str(campaign)):
        loaded = require_campaign(campaign)
        folder, doc, code = run_gates(loaded, Path(runs_dir), only,
                                      echo=(lambda entry: None) if as_json else _line)
    verdict = headline(doc, [g.name for g in loaded.gates])
    if as_json:
        emit({"record": str(folder), "ok": code == 0, "exit_code": code, "verdict": verdict,
              **{k: doc[k] for k in ("campaign", "source_seal", "git", "gates", "refusals")}})
        raise click.exceptions.Exit(code)
    for refusal in doc["refusals"]:
        click.echo(f"REFUSED {refusal['rule']}: {inert(refusal['detail'], 2000)}")
    click.echo(f"{inert(verdict, 2000)}: {inert(str(folder), 1000)} (seal {doc['source_seal']})")
    if not doc["git"]["clean"]:
        click.echo(f"note: the checkout was not clean at commit {inert(doc['git']['commit'], 80)}"
                   f" ({inert('; '.join(doc['git']['problems'][:3]), 500)}): no approval can "
                   "rest on this record; commit, then run the gates again")
    raise click.exceptions.Exit(code)

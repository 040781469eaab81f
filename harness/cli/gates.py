"""`harness gates` and `harness approve`: the sealed gate record, and the approval that
rests on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from harness.cli.jsonout import as_json_errors, emit, json_option
from harness.cli.params import runs_dir_option
from harness.config.loader import require_campaign
from harness.judge.approval.issue import reviewer_mismatch
from harness.judge.approval.signature import SignatureCheck
from harness.judge.gaterecord.gatelines import headline
from harness.probe.approval.write import approve as do_approve
from harness.probe.approval.write import default_reviewer, gate_folder, signer_of
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


@click.command("approve")
@click.argument("campaign", type=click.Path(path_type=Path))
@click.option("--gates", "gate_record", required=True, metavar="NAME|DIR",
              help="the sealed gate record (`harness gates`) this approval rests on: its "
                   "name, as the approval stores it (found in RUNS_DIR/gates/), or its folder")
@runs_dir_option("any", help="where a gate record NAME is looked up (RUNS_DIR/gates/)",
                 campaign="campaign")
@click.option("--sign-key", type=click.Path(path_type=Path),
              help="sign with ssh-keygen -Y sign (namespace harness-approval@v1): a private "
                   "key file, or a public key file whose private half is in ssh-agent")
@click.option("--reviewer", help="who approves (default: git's user.email or user.name, "
                                 "else $USER)")
@json_option("approval, ok, exit_code, source_seal, commit, gates, reviewer, signed, "
             "signer, warning")
def approve(campaign: Path, gate_record: str, runs_dir: Path, sign_key: Path | None,
            reviewer: str | None, as_json: bool) -> None:
    """Approve the campaign's current source seal for runs.

    Writes approvals/<campaign>-<seal hex 12>.json (and .sig with --sign-key): the seal,
    the commit reviewed, image Ids, model pins, the gate record, the reviewer and the time.
    A campaign with `require_approval: true` runs only under an approval of its run's seal;
    an approval is never overwritten (docs/approval.md).

    Exit codes: 0 written; 1 refused, naming its rule (the checkout not clean at its
    commit, or the gate record missing, failed, unverifiable or for another seal, campaign
    or commit); 2 invalid campaign, reviewer, key or --gates (a folder, or a record name
    not in RUNS_DIR/gates/), or an approval of this seal exists; 3 no ssh-keygen.
    """
    with as_json_errors(as_json, campaign=str(campaign)):
        loaded = require_campaign(campaign)
        who = reviewer if reviewer is not None else default_reviewer(loaded.project_dir)
        path, doc = do_approve(loaded, gate_folder(gate_record, runs_dir), who, sign_key)
        signer = signer_of(loaded, path)
    warning = reviewer_mismatch(doc["reviewer"], signer)
    if as_json:
        emit({"approval": str(path), "ok": True, "exit_code": 0,
              "source_seal": doc["source_seal"], "commit": doc["git"]["commit"],
              "gates": doc["gates"], "reviewer": doc["reviewer"], "signed": sign_key is not None,
              "signer": signer.principal if signer is not None and signer.ok else None,
              "warning": warning})
        return
    click.echo(f"approved: {inert(str(path), 500)}")
    click.echo(f"  seal {doc['source_seal']} at commit {inert(doc['git']['commit'], 80)}")
    click.echo(f"  gates {inert(doc['gates']['record'], 500)} ({doc['gates']['digest']}), "
               "found by name in the runs dir's gates/")
    click.echo(f"  reviewer {inert(doc['reviewer'], 200)}; " + _signed(sign_key, signer))
    if warning is not None:
        click.echo(f"  warning: {inert(warning, 2000)}")
        click.echo(f"harness: warning: {inert(warning, 2000)}", err=True)


def _signed(key: Path | None, signer: SignatureCheck | None) -> str:
    """How the approval is signed, and by whom when the campaign's allowed_signers says."""
    if key is None:
        return "unsigned"
    if signer is None:
        return "signed (the campaign names no allowed_signers: its principal is not checked)"
    if signer.ok and signer.principal is not None:
        return f"signed by {inert(signer.principal, 200)} (allowed_signers)"
    return "signed, but the signature does not verify against allowed_signers"

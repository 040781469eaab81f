"""`harness approve CAMPAIGN --gates GATE_RECORD [--sign-key KEY] [--reviewer NAME]`."""

from __future__ import annotations

from pathlib import Path

import click

from harness.config.loader import require_campaign
from harness.judge.approval.issue import approve as do_approve
from harness.judge.approval.issue import default_reviewer
from harness.readers.report.inert import inert


@click.command("approve")
@click.argument("campaign", type=click.Path(path_type=Path))
@click.option("--gates", "gate_record", required=True, type=click.Path(path_type=Path),
              help="the sealed gate record folder (`harness gates`) this approval rests on")
@click.option("--sign-key", type=click.Path(path_type=Path),
              help="sign with ssh-keygen -Y sign (namespace harness-approval@v1): a private "
                   "key file, or a public key file whose private half is in ssh-agent")
@click.option("--reviewer", help="who approves (default: git's user.email or user.name, "
                                 "else $USER)")
def approve(campaign: Path, gate_record: Path, sign_key: Path | None,
            reviewer: str | None) -> None:
    """Approve the campaign's current source seal for runs.

    Writes approvals/<campaign>-<seal hex 12>.json in the project (and .sig with
    --sign-key): the source seal, the git commit reviewed, the image Ids and model pins of
    the campaign's controls, the gate record's digest, campaign and seal, the reviewer and
    the time. A campaign with `require_approval: true` runs only under an approval of its
    run's seal (docs/approval.md). An approval is never overwritten.

    Exit codes: 0 written; 1 refused, naming its rule: the checkout is not clean at its
    commit (APPROVAL-DIRTY-TREE: a file of the seal untracked, git-ignored, outside the
    repository or changed, or any other path changed or untracked; approvals/ aside), the
    gate record is missing, fails verification, failed, was made for another seal or
    campaign, or its gates did not run from this same clean commit (APPROVAL-GATES-*);
    2 invalid campaign, reviewer, key, or an approval of this seal exists; 3 environment
    (no ssh-keygen).
    """
    loaded = require_campaign(campaign)
    who = reviewer if reviewer is not None else default_reviewer(loaded.project_dir)
    path, doc = do_approve(loaded, gate_record, who, sign_key)
    click.echo(f"approved: {inert(str(path), 500)}")
    click.echo(f"  seal {doc['source_seal']} at commit {inert(doc['git']['commit'], 80)}")
    click.echo(f"  gates {inert(doc['gates']['record'], 500)} ({doc['gates']['digest']})")
    click.echo(f"  reviewer {inert(doc['reviewer'], 200)}"
               + ("; signed" if sign_key is not None else "; unsigned"))

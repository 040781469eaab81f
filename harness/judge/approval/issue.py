"""What `harness approve` may write, as pure rules: a checkout clean at its commit, a
reviewer's name, the gate record's name, and whether the signer is the reviewer."""

from __future__ import annotations

import os
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.tree import printable
from harness.judge.approval import basis
from harness.judge.approval.signature import SignatureCheck
from harness.judge.gaterecord.gatesjson import GATES_DIR
from harness.measure.provenance import CleanCheck

MAX_REVIEWER = 200


def dirty_reason(clean: CleanCheck) -> str | None:
    """Pure: why the checkout is not an immutable head to approve (None: it is). Clean at X
    means every sealed byte is tracked in X with the same bytes and nothing else changed or
    untracked: `git status` alone never lists an ignored file or one outside the repo."""
    if clean.clean and isinstance(clean.commit, str):
        return None
    return (f"{clean.why()}; commit every input inside the checkout (none git-ignored or "
            "outside it), then approve the commit")


def reviewer_name(value: str) -> str:
    value = value.strip()
    if not value or len(value) > MAX_REVIEWER or not value.isprintable():
        raise InvalidInput(f"reviewer {printable(value)[:MAX_REVIEWER]!r} must be one line of "
                           f"1 to {MAX_REVIEWER} printable characters")
    return value


def record_of(gate_dir: Path) -> str:
    """The name an approval gives its gate record: the folder's own name, which a run finds as
    RUNS/gates/<name> on any host (`basis.locate`); never the operator's path. The
    folder must be in a `gates` folder, where `harness gates` writes it (InvalidInput)."""
    folder = Path(os.path.abspath(gate_dir))
    name = basis.record_name(folder.name)
    if name is None or folder.parent.name != GATES_DIR:
        raise InvalidInput(f"{printable(str(gate_dir))}: not a gate record folder as `harness "
                           f"gates` writes it (RUNS/{GATES_DIR}/<campaign>-<stamp>): a run "
                           "finds the record by that name in its runs dir")
    return name


def reviewer_mismatch(reviewer: str, check: SignatureCheck | None) -> str | None:
    """Pure: the warning when the approval's reviewer is not the principal that signed it (None:
    they agree, or nothing is known of the signer). Runs trust the signature's principal;
    `reviewer` is the approver's own word, so a difference is said, never silent."""
    if check is None:
        return None
    if not check.ok:
        return (f"the signature does not verify against the campaign's allowed_signers "
                f"({check.detail}): a run will refuse this approval (APPROVAL-SIGNATURE)")
    if check.principal is not None and check.principal != reviewer:
        return (f"reviewer {printable(reviewer)!r} is not the signing principal "
                f"{printable(check.principal)!r}: runs and bundle verify trust the signer; "
                f"name it with --reviewer {printable(check.principal)} (or sign with the "
                "reviewer's own key)")
    return None

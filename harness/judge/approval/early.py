"""The refusal before any run folder exists, with the next step spelled out: pure.

An unapproved seal exits 1 with nothing written, instead of sealing a refused attempt per
control. Preflight asks the same function again under the run's own seal, so a change
between the two is still refused, and the two never disagree on the same bytes."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from pathlib import Path

from harness.base.catalogue import (
    APPROVAL_DIRTY_TREE,
    APPROVAL_GATES_DIRTY,
    APPROVAL_GATES_FAILED,
    APPROVAL_GATES_MISSING,
    APPROVAL_GATES_NOT_INTACT,
    APPROVAL_GATES_OTHER_COMMIT,
    APPROVAL_GATES_OTHER_SEAL,
    APPROVAL_IMAGE_CHANGED,
    APPROVAL_INVALID,
    APPROVAL_MODEL_CHANGED,
    APPROVAL_OTHER_SEAL,
    APPROVAL_SIGNATURE,
    APPROVAL_UNSEALED_MOUNT,
    PROVENANCE_DIRTY,
    SEAL_NOT_APPROVED,
)
from harness.base.errors import EnvironmentFault, HarnessError, Refused
from harness.base.reason import Reason
from harness.judge.approval.document import refusal_text

# What to do next, per rule; {gates}/{approve} are the two commands, {file} the approval.
_NEW_SEAL = "run {gates} then {approve} for seal {seal}"
_REPLACE = "remove {file} in a commit, then " + _NEW_SEAL
NEXT: dict[str, str] = {
    SEAL_NOT_APPROVED: _NEW_SEAL,
    APPROVAL_OTHER_SEAL: _NEW_SEAL,
    APPROVAL_IMAGE_CHANGED: _NEW_SEAL,
    APPROVAL_MODEL_CHANGED: _NEW_SEAL,
    APPROVAL_INVALID: _REPLACE,
    APPROVAL_DIRTY_TREE: _REPLACE,
    APPROVAL_SIGNATURE: _REPLACE + " with --sign-key (a key the campaign's allowed_signers "
                                   "lists)",
    APPROVAL_GATES_FAILED: _REPLACE,
    APPROVAL_GATES_NOT_INTACT: _REPLACE,
    APPROVAL_GATES_OTHER_SEAL: _REPLACE,
    APPROVAL_GATES_DIRTY: _REPLACE,
    APPROVAL_GATES_OTHER_COMMIT: _REPLACE,
    APPROVAL_GATES_MISSING: "run with the --runs-dir that holds its gate record, or " + _REPLACE,
    PROVENANCE_DIRTY: ("commit (or remove) what is not clean, or reinstall an edited "
                       "installed harness from its wheel, then run again"),
    APPROVAL_UNSEALED_MOUNT: "mark the mount `sealed: true` (or drop require_approval), then "
                             + _NEW_SEAL,
}


def shown_path(path: Path, cwd: Path) -> str:
    """Pure: `path` as the operator would type it here, quoted for a shell."""
    path = Path(os.path.abspath(path))
    return shlex.quote(str(path.relative_to(cwd) if path.is_relative_to(cwd) else path))


def next_steps(rules: Iterable[str], campaign: str, seal: str, runs_dir: str | None,
               approval: str) -> list[str]:
    """Pure: what to do next for each rule that refused, once each, in the rules' order."""
    runs = f" --runs-dir {runs_dir}" if runs_dir else ""
    words = {"gates": f"`harness gates {campaign}{runs}`",
             "approve": f"`harness approve {campaign} --gates RECORD`",
             "seal": seal, "file": approval}
    steps = [NEXT[rule].format(**words) for rule in rules if rule in NEXT]
    return list(dict.fromkeys(steps))


def refusal(reasons: list[Reason], campaign: str, seal: str, runs_dir: str | None,
            approval: str) -> HarnessError | None:
    """Pure: the error a run refused before its folder exists ends with (None: it may
    run): Refused naming the first rule (EnvironmentFault when the host is at fault, no
    ssh-keygen), every reason once, then the next step."""
    if not reasons:
        return None
    rule, text = refusal_text([(r.rule, r.detail) for r in reasons])
    steps = next_steps([r.rule for r in reasons], campaign, seal, runs_dir, approval)
    message = f"{text}; nothing was run or written" + (
        f". Next: {'; or '.join(steps)}" if steps else "")
    kind = EnvironmentFault if any(r.environment for r in reasons) else Refused
    return kind(message, rule=rule)


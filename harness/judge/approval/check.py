"""The run-time check's decisions: under `require_approval: true`, a run needs an approval of
its seal, and what it executes must be what was approved (`what_runs`).

Everything read here is hostile: approval files are read bounded, never through a
symlink, parsed strictly; the gate record through its own verifying reader."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from harness.base.catalogue import (
    APPROVAL_INVALID,
    APPROVAL_SIGNATURE,
    APPROVAL_UNSEALED_MOUNT,
    ENV_ERROR,
    PROVENANCE_DIRTY,
    SEAL_NOT_APPROVED,
)
from harness.base.errors import EnvironmentFault, HarnessError
from harness.base.readfile import InputError, read_bounded
from harness.base.reason import Reason
from harness.base.tree import printable
from harness.config.loader import Loaded
from harness.judge.approval import basis
from harness.judge.approval.document import (
    APPROVALS_DIR,
    LIMIT,
    Finding,
    Pins,
    invalid,
    match,
    parse,
)
from harness.judge.approval.signature import SignatureCheck
from harness.measure.provenance import CleanCheck

MAX_CANDIDATES = 10  # other approvals of the campaign named in a refusal
SIG_SUFFIX = ".sig"
SIG_LIMIT = 64 * 1024  # bytes of a signature file read

# What checking an approval's signature found: None when the campaign names no
# allowed_signers; the signature file unreadable (InputError); no ssh-keygen
# (EnvironmentFault); a bad allowed_signers file (HarnessError); else OpenSSH's answer.
Signed = SignatureCheck | InputError | HarnessError | None


def approvals_dir(loaded: Loaded) -> Path:
    return loaded.project_dir / APPROVALS_DIR


def candidates(folder: Path, campaign: str) -> list[Path]:
    """The campaign's approval files (regular files named <campaign>-<12 hex>.json), sorted."""
    shape = re.compile(re.escape(campaign) + r"-[0-9a-f]{12}\.json")
    try:
        with os.scandir(folder) as entries:
            return sorted(Path(e.path) for e in entries
                          if shape.fullmatch(e.name) and e.is_file(follow_symlinks=False))
    except OSError:
        return []


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + SIG_SUFFIX)


def signature_findings(sig: Path, signed: Signed) -> list[Finding]:
    """Pure: with `allowed_signers` set, the approval must carry a valid signature from it;
    a host with no ssh-keygen is unfit (ENV-ERROR), the approval is not bad."""
    if signed is None:
        return []
    if isinstance(signed, InputError):
        return [(APPROVAL_SIGNATURE, f"{printable(str(sig))}: unsigned ({signed.message})")]
    if isinstance(signed, EnvironmentFault):
        return [(ENV_ERROR, printable(signed.message))]
    if isinstance(signed, HarnessError):
        return [(APPROVAL_SIGNATURE, printable(signed.message))]
    return [] if signed.ok else [(APPROVAL_SIGNATURE, f"{printable(str(sig))}: {signed.detail}")]


def read_doc(path: Path) -> tuple[bytes, dict[str, Any] | None, list[Finding]]:
    try:
        data = read_bounded(path, LIMIT, "approval")
        return data, parse(data), []
    except InputError as e:
        return b"", None, [invalid(str(path), e.message)]
    except ValueError as e:
        return b"", None, [invalid(str(path), str(e))]


def judge(loaded: Loaded, path: Path, data: bytes, doc: dict[str, Any], pins: Pins,
          signed: Signed, runs_dir: Path | None = None) -> tuple[dict, list[Finding]]:
    """Every reason the approval at `path` does not cover a run with `pins`."""
    found = match(doc, pins) + signature_findings(signature_path(path), signed)
    named_campaign = doc.get("campaign", {}).get("name") if isinstance(doc.get("campaign"),
                                                                         dict) else None
    if named_campaign != loaded.campaign.name:  # another campaign's approval, renamed
        found.append(invalid(str(path), f"it approves campaign "
                                        f"{printable(str(named_campaign))}, not "
                                        f"{loaded.campaign.name}"))
    folder, missing = basis.locate(doc["gates"]["record"], runs_dir)
    commit = doc["git"].get("commit")
    found += missing if folder is None else basis.recheck(
        folder, doc["gates"]["digest"], basis.Wanted(
            loaded.campaign.name, tuple(g.name for g in loaded.gates), pins.seal,
            commit if isinstance(commit, str) else None))
    named = {"file": f"{APPROVALS_DIR}/{path.name}",
             "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
             "seal": doc["source_seal"], "commit": doc["git"].get("commit")}
    return named, found


def not_approved(loaded: Loaded, seal: str, pins: Pins) -> list[Finding]:
    """No approval for this seal: say what the campaign's other approvals were for, else
    that there is none."""
    found: list[Finding] = []
    for path in candidates(approvals_dir(loaded), loaded.campaign.name)[:MAX_CANDIDATES]:
        _, doc, bad = read_doc(path)
        found += bad if doc is None else [(rule, f"{path.name}: {detail}")
                                          for rule, detail in match(doc, pins)]
    return found or [(SEAL_NOT_APPROVED, f"no approval of seal {seal} in "
                                         f"{printable(str(approvals_dir(loaded)))} (run "
                                         f"`harness approve` after the gates pass)")]


def symlinked(folder: Path) -> Finding:
    """Pure: approvals live in the repo, where a reviewer sees them, never behind a symlink."""
    return (APPROVAL_INVALID, f"{printable(str(folder))} is a symlink; approvals must be a "
                              "real folder of the project")


def what_runs(loaded: Loaded, clean: CleanCheck) -> list[Finding]:
    """Pure: what a run executes must be what was approved: every byte it is made of is in
    the seal (no read-only mount left out of it with `sealed: false`), and the checkout is
    clean at its commit over the seal's own file list (`clean`: `provenance.clean_at`, the
    rule approve applies), so neither a dirty tree nor a git-ignored or outside file runs
    under an approval of the commit."""
    found: list[Finding] = [
        (APPROVAL_UNSEALED_MOUNT, f"control {name}: mount {printable(m.source)} -> {m.target} "
                                  "is `sealed: false`: no approval covers its bytes")
        for name, (ctl, _) in sorted(loaded.controls.items()) for m in ctl.mounts
        if m.read_only and not m.sealed]
    if not clean.clean:
        found.append((PROVENANCE_DIRTY, f"{clean.why()}: commit, or run from a clean "
                                        "checkout (an edited installed harness: reinstall "
                                        "it from its wheel)"))
    return found


def decide(named: dict | None, found: list[Finding], dirty: list[Finding]
           ) -> tuple[dict | None, list[Reason]]:
    """Pure: the approval a run runs under ({"file", "digest", "seal", "commit"}; None when
    anything was found against it or against what runs), and each reason it may not run:
    those against the approval (`found`), then those against what runs (`dirty`)."""
    reasons = [Reason(rule, detail) for rule, detail in [*found, *dirty]]
    return (None if found or dirty else named), reasons

"""`harness approve`: write the approval of a campaign's current seal, from a checkout clean
at its commit, on a passed, verifying gate record of the same seal. Never overwritten;
`approvals/` is outside the seal, so approving does not change what it approves."""

from __future__ import annotations

import getpass
import os
import subprocess
from pathlib import Path
from typing import Any

from harness.base.atomic import dumps_json, write_bytes
from harness.base.catalogue import APPROVAL_DIRTY_TREE
from harness.base.errors import HarnessError, InvalidInput, Refused
from harness.base.timeutil import utc_now
from harness.base.tree import printable
from harness.config.loader import Loaded
from harness.judge.approval import basis
from harness.judge.approval.check import SIG_SUFFIX, approvals_dir
from harness.judge.approval.document import build, file_name, pins_of, refusal_text
from harness.judge.approval.issue import dirty_reason, record_of, reviewer_name
from harness.judge.approval.signature import SignatureCheck
from harness.measure.provenance import CleanCheck, clean_at
from harness.measure.seal import source_files, source_seal
from harness.probe.sshsig import sign, verify


def default_reviewer(project_dir: Path) -> str:
    """git's user.email (else user.name) for the project, else the login name."""
    for key in ("user.email", "user.name"):
        try:
            out = subprocess.run(["git", "-C", str(project_dir), "config", "--get", key],
                                 capture_output=True, text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            break
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return os.environ.get("USER") or getpass.getuser()


def gate_folder(given: str, runs_dir: Path) -> Path:
    """The gate record `--gates` names: a folder, or a record's name (the name an approval
    stores) found in `runs_dir/gates/`; anything else is bad input (exit 2), a name never
    leading out of that folder."""
    if os.path.isdir(given):
        return Path(given)
    shown = printable(given)[:300]
    if basis.record_name(given) != given:
        raise InvalidInput(f"--gates {shown!r}: not a folder, nor a gate record name "
                           "(letters, digits, . _ -; no folder part)")
    folder, found = basis.locate(given, runs_dir)
    if folder is None:
        raise InvalidInput(f"--gates: {found[0][1]}")
    return folder


def checkout_of(loaded: Loaded) -> tuple[str, CleanCheck]:
    """The source seal now and whether the checkout is clean, over one file list."""
    inputs = loaded.files()
    return (source_seal(loaded.project_dir, inputs).digest,
            clean_at(loaded.project_dir, source_files(loaded.project_dir, inputs)))


def approve(loaded: Loaded, gate_dir: Path, reviewer: str,
            key: Path | None) -> tuple[Path, dict[str, Any]]:
    """Write the approval (and its signature); Refused naming the rule otherwise."""
    reviewer = reviewer_name(reviewer)
    seal, clean = checkout_of(loaded)
    if (why := dirty_reason(clean)) is not None:
        raise Refused(why, rule=APPROVAL_DIRTY_TREE)
    want = basis.Wanted(loaded.campaign.name, tuple(g.name for g in loaded.gates), seal,
                        clean.commit)
    summary, found = basis.read(gate_dir, want)
    if found or summary is None:
        rule, text = refusal_text(found)  # the CLI prints the rule once, before the text
        raise Refused(text, rule=rule)
    campaign_file = loaded.campaign_file.relative_to(loaded.project_dir).as_posix()
    doc = build({"name": loaded.campaign.name, "file": campaign_file},
                pins_of(loaded, seal), {"commit": clean.commit, "dirty": False},
                {"record": record_of(gate_dir), **summary}, reviewer, utc_now(), clean.harness)
    path = approvals_dir(loaded) / file_name(loaded.campaign.name, seal)
    if os.path.islink(path.parent):  # a run would refuse it: approvals live in the repo
        raise InvalidInput(f"{printable(str(path.parent))} is a symlink; approvals must be a "
                           "real folder of the project")
    if os.path.lexists(path):
        raise InvalidInput(f"{printable(str(path))} exists: an approval is never overwritten "
                           "(remove it, in a commit, to approve this seal again)")
    data = dumps_json(doc).encode()
    signature = sign(data, key) if key is not None else None  # a bad key writes nothing
    try:
        path.parent.mkdir(exist_ok=True)
        if signature is not None:  # the signature first: an approval never lacks its .sig
            write_bytes(path.with_name(path.name + SIG_SUFFIX), signature, exclusive=True)
        write_bytes(path, data, exclusive=True)
    except OSError as e:
        raise InvalidInput(f"cannot write {printable(str(path))}: "
                           f"{printable(e.strerror or str(e))}") from None
    return path, doc


def signer_of(loaded: Loaded, path: Path) -> SignatureCheck | None:
    """Who signed the approval, by the campaign's allowed_signers (None: unknown)."""
    sig = path.with_name(path.name + SIG_SUFFIX)
    if loaded.campaign.allowed_signers is None or not sig.is_file():
        return None
    try:
        return verify(path.read_bytes(), sig.read_bytes(), loaded.signers_file)
    except (HarnessError, OSError) as e:  # written already: said as a warning, not a failure
        return SignatureCheck(False, printable(getattr(e, "message", None) or str(e)))

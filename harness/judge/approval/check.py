"""The run-time check: under `require_approval: true`, a run needs an approval of its seal,
and what it executes must be what was approved (`what_runs`).

Called by the preflight stage (before the lock), so a refused run is sealed `refused` with
the rule. Everything read here is hostile: approval files are read bounded, never through
a symlink, parsed strictly; signatures are checked by OpenSSH against the campaign's
`allowed_signers`; the gate record through its own verifying reader.
"""

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
from harness.judge.approval import gates
from harness.judge.approval.record import (
    APPROVALS_DIR,
    LIMIT,
    Finding,
    Pins,
    file_name,
    invalid,
    match,
    parse,
    pins_of,
)
from harness.judge.approval.sign import verify
from harness.measure.provenance import clean_at
from harness.measure.seal import source_files

MAX_CANDIDATES = 10  # other approvals of the campaign named in a refusal
SIG_SUFFIX = ".sig"


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


def _signature(loaded: Loaded, path: Path, data: bytes) -> list[Finding]:
    """With `allowed_signers` set, the approval must carry a valid signature from it."""
    if loaded.campaign.allowed_signers is None:
        return []
    allowed = loaded.signers_file
    sig = path.with_name(path.name + SIG_SUFFIX)
    try:
        signature = read_bounded(sig, 64 * 1024, "signature")
        result = verify(data, signature, allowed)
    except InputError as e:
        return [(APPROVAL_SIGNATURE, f"{printable(str(sig))}: unsigned ({e.message})")]
    except EnvironmentFault as e:  # no ssh-keygen: the host is unfit, the approval is not bad
        return [(ENV_ERROR, printable(e.message))]
    except HarnessError as e:
        return [(APPROVAL_SIGNATURE, printable(e.message))]
    return [] if result.ok else [(APPROVAL_SIGNATURE, f"{printable(str(sig))}: {result.detail}")]


def read_doc(path: Path) -> tuple[bytes, dict[str, Any] | None, list[Finding]]:
    try:
        data = read_bounded(path, LIMIT, "approval")
        return data, parse(data), []
    except InputError as e:
        return b"", None, [invalid(str(path), e.message)]
    except ValueError as e:
        return b"", None, [invalid(str(path), str(e))]


def judge(loaded: Loaded, path: Path, pins: Pins, runs_dir: Path | None = None
          ) -> tuple[dict | None, list[Finding]]:
    """Every reason the approval at `path` does not cover a run with `pins`; its gate
    record is looked for by name in `runs_dir`/gates (`gates.locate`)."""
    data, doc, found = read_doc(path)
    if doc is None:
        return None, found
    found = match(doc, pins) + _signature(loaded, path, data)
    named_campaign = doc.get("campaign", {}).get("name") if isinstance(doc.get("campaign"),
                                                                         dict) else None
    if named_campaign != loaded.campaign.name:  # another campaign's approval, renamed
        found.append(invalid(str(path), f"it approves campaign "
                                        f"{printable(str(named_campaign))}, not "
                                        f"{loaded.campaign.name}"))
    folder, missing = gates.locate(doc["gates"]["record"], runs_dir)
    commit = doc["git"].get("commit")
    found += missing if folder is None else gates.recheck(
        folder, doc["gates"]["digest"], gates.Wanted(
            loaded.campaign.name, tuple(g.name for g in loaded.gates), pins.seal,
            commit if isinstance(commit, str) else None))
    named = {"file": f"{APPROVALS_DIR}/{path.name}",
             "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
             "seal": doc["source_seal"], "commit": doc["git"].get("commit")}
    return named, found


def _others(loaded: Loaded, pins: Pins) -> list[Finding]:
    """No approval for this seal: say what the campaign's other approvals were for."""
    found: list[Finding] = []
    for path in candidates(approvals_dir(loaded), loaded.campaign.name)[:MAX_CANDIDATES]:
        _, doc, bad = read_doc(path)
        found += bad if doc is None else [(rule, f"{path.name}: {detail}")
                                          for rule, detail in match(doc, pins)]
    return found


def what_runs(loaded: Loaded, inputs: list[Path]) -> list[Finding]:
    """What a run executes must be what was approved: every byte it is made of is in the
    seal (no read-only mount left out of it with `sealed: false`), and the checkout is clean
    at its commit over the seal's own file list (`provenance.clean_at`, the rule approve
    applies), so neither a dirty tree nor a git-ignored or outside file runs under an
    approval of the commit. `inputs`: the list the run's seal was taken over, so the check
    reads the same files the seal hashed, walked once."""
    found: list[Finding] = [
        (APPROVAL_UNSEALED_MOUNT, f"control {name}: mount {printable(m.source)} -> {m.target} "
                                  "is `sealed: false`: no approval covers its bytes")
        for name, (ctl, _) in sorted(loaded.controls.items()) for m in ctl.mounts
        if m.read_only and not m.sealed]
    clean = clean_at(loaded.project_dir, source_files(loaded.project_dir, inputs))
    if not clean.clean:
        found.append((PROVENANCE_DIRTY, f"{clean.why()}: commit, or run from a clean "
                                        "checkout (an edited installed harness: reinstall "
                                        "it from its wheel)"))
    return found


def for_run(loaded: Loaded, seal: str, inputs: list[Path] | None = None,
            runs_dir: Path | None = None) -> tuple[dict | None, list[Reason]]:
    """The approval a run with this seal runs under ({"file", "digest", "seal", "commit"}),
    and each reason it may not run; (None, []) when the campaign does not require one.
    `inputs`: the files the seal was taken over (default: `loaded.files()` now);
    `runs_dir`: where the approval's gate record is looked for (RUNS/gates/<name>).
    The one decision: `before_run` asks it before any run folder exists, the preflight
    stage again and seals its answer."""
    if not loaded.campaign.require_approval:
        return None, []
    named, reasons = _approval_for(loaded, seal, runs_dir)
    found = what_runs(loaded, loaded.files() if inputs is None else inputs)
    dirty = [Reason(rule, detail) for rule, detail in found]
    return (None if dirty else named), reasons + dirty


def _approval_for(loaded: Loaded, seal: str, runs_dir: Path | None
                  ) -> tuple[dict | None, list[Reason]]:
    pins = pins_of(loaded, seal)
    folder = approvals_dir(loaded)
    if os.path.islink(folder):  # approvals live in the repo, where a reviewer sees them
        return None, [Reason(APPROVAL_INVALID, f"{printable(str(folder))} is a symlink; "
                             "approvals must be a real folder of the project")]
    path = folder / file_name(loaded.campaign.name, seal)
    if os.path.lexists(path):
        named, found = judge(loaded, path, pins, runs_dir)
    else:
        named, found = None, _others(loaded, pins)
        if not found:
            found = [(SEAL_NOT_APPROVED, f"no approval of seal {seal} in "
                                         f"{printable(str(approvals_dir(loaded)))} (run "
                                         f"`harness approve` after the gates pass)")]
    return (None if found else named), [Reason(rule, detail) for rule, detail in found]

"""The run-time approval check: under `require_approval: true`, a run needs an approval of
its seal, and what it executes must be what was approved.

`for_run` is the one decision's shell: the preflight stage asks it (before the lock), so a
refused run is sealed `refused` with the rule, and `before_run` asks it before any run or
night folder exists. It reads the approval's bytes once, has OpenSSH check the signature
over those same bytes, asks git whether the checkout is clean at its commit, and hands the
facts to harness.judge.approval.check.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.base.errors import HarnessError
from harness.base.readfile import InputError, read_bounded
from harness.base.reason import Reason
from harness.config.loader import Loaded
from harness.judge.approval.check import (
    SIG_LIMIT,
    Signed,
    approvals_dir,
    decide,
    judge,
    not_approved,
    read_doc,
    signature_path,
    symlinked,
    what_runs,
)
from harness.judge.approval.early import refusal, shown_path
from harness.judge.approval.record import APPROVALS_DIR, Finding, Pins, file_name, pins_of
from harness.measure.provenance import clean_at
from harness.measure.seal import source_files, source_seal
from harness.probe.sshsig import verify


def _signed(loaded: Loaded, path: Path, data: bytes) -> Signed:
    """OpenSSH's check of the approval's signature over `data`, the bytes judged."""
    if loaded.campaign.allowed_signers is None:
        return None
    allowed = loaded.signers_file
    try:
        return verify(data, read_bounded(signature_path(path), SIG_LIMIT, "signature"), allowed)
    except (InputError, HarnessError) as e:
        return e


def _judged(loaded: Loaded, path: Path, pins: Pins, runs_dir: Path | None
            ) -> tuple[dict | None, list[Finding]]:
    data, doc, found = read_doc(path)
    if doc is None:
        return None, found
    return judge(loaded, path, data, doc, pins, _signed(loaded, path, data), runs_dir)


def for_run(loaded: Loaded, seal: str, inputs: list[Path] | None = None,
            runs_dir: Path | None = None) -> tuple[dict | None, list[Reason]]:
    """The approval a run with this seal runs under ({"file", "digest", "seal", "commit"}),
    and each reason it may not run; (None, []) when the campaign does not require one.
    `inputs`: the files the seal was taken over (default: `loaded.files()` now), so the
    clean check reads the same files the seal hashed, walked once; `runs_dir`: where the
    approval's gate record is looked for (RUNS/gates/<name>)."""
    if not loaded.campaign.require_approval:
        return None, []
    pins = pins_of(loaded, seal)
    folder = approvals_dir(loaded)
    path = folder / file_name(loaded.campaign.name, seal)
    if os.path.islink(folder):
        named, found = None, [symlinked(folder)]
    elif os.path.lexists(path):
        named, found = _judged(loaded, path, pins, runs_dir)
    else:
        named, found = None, not_approved(loaded, seal, pins)
    files = loaded.files() if inputs is None else inputs
    clean = clean_at(loaded.project_dir, source_files(loaded.project_dir, files))
    return decide(named, found, what_runs(loaded, clean))


def before_run(loaded: Loaded, runs_dir: Path | None, seal: str | None = None) -> None:
    """Raise the refusal of a `require_approval` campaign whose seal (now, or `seal`) no
    approval covers, before any folder is made; nothing when it needs none or has one."""
    if not loaded.campaign.require_approval:
        return
    inputs = loaded.files()
    seal = seal or source_seal(loaded.project_dir, inputs).digest
    _, reasons = for_run(loaded, seal, inputs, runs_dir=runs_dir)
    cwd = Path.cwd()
    approval = f"{APPROVALS_DIR}/{file_name(loaded.campaign.name, seal)}"
    error = refusal(reasons, shown_path(loaded.campaign_file, cwd), seal,
                    None if runs_dir is None else shown_path(runs_dir, cwd), approval)
    if error is not None:
        raise error

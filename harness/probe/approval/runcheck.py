"""The run-time approval check: under `require_approval: true` a run needs an approval of
its seal; its bytes are read once and OpenSSH checks the signature over those same bytes
(the judge is `judge.approval.check`)."""

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
from harness.judge.approval.document import APPROVALS_DIR, Finding, Pins, file_name, pins_of
from harness.judge.approval.early import refusal, shown_path
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
    """The approval a run with this seal runs under, and each reason it may not run; (None,
    []) when not required. `inputs`: the files the seal hashed (read once more for the clean
    check); `runs_dir`: where the gate record is looked for."""
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
    """Refuse a campaign whose seal no approval covers, before any folder is made."""
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

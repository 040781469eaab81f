"""Helpers for approval tests: git projects, gate records, SSH keys."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.approval.sign import NAMESPACE
from harness.config.loader import require_campaign
from harness.runfolder.manifest import write_manifest
from harness.seal import source_seal
from tests.unit.bundle_helpers import make_keys as signer

GIT_ENV = {"GIT_AUTHOR_NAME": "Rev", "GIT_AUTHOR_EMAIL": "rev@example",
           "GIT_COMMITTER_NAME": "Rev", "GIT_COMMITTER_EMAIL": "rev@example",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True, env=GIT_ENV).stdout


def commit_all(root: Path, message: str = "state") -> str:
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.email", "rev@example")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def seal_of(campaign: Path) -> str:
    loaded = require_campaign(campaign)
    return source_seal(loaded.project_dir, loaded.files()).digest


def gate_record(folder: Path, campaign: str, seal: str, *, passed: bool = True) -> Path:
    """A minimal sealed v1 gate record (the shape harness.gates.record reads)."""
    folder.mkdir(parents=True)
    gate = {"name": "unit", "argv": ["true"], "exit_code": 0 if passed else 1,
            "passed": passed, "duration_s": 0.1, "counts": None, "kill_score": None,
            "min_kill_score": None, "why": None if passed else "exit 1"}
    doc = {"schema": "harness.gates/v1", "campaign": {"name": campaign, "file": "x.yaml"},
           "source_seal": seal, "git": {}, "passed": passed, "gates": [gate],
           "times": {"started": "2026-11-30T00:00:00Z", "ended": "2026-11-30T00:00:01Z"}}
    (folder / "gates.json").write_text(json.dumps(doc))
    write_manifest(folder)
    return folder


def make_keys(tmp: Path, name: str) -> tuple[Path, Path]:
    """An ed25519 key pair and an allowed_signers file trusting it for approvals."""
    key, line = signer(tmp, name, NAMESPACE)
    allowed = tmp / f"{name}.allowed"
    allowed.write_text(line)
    return key, allowed

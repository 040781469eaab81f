"""Helpers for approval tests: git projects, gate records, SSH keys."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness.config.loader import require_campaign
from harness.judge.approval.signature import NAMESPACE
from harness.measure import seal as seal_module
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.seal import PACKAGE_DIR, source_seal
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


def seal_of(campaign: Path, root: Path | None = None) -> str:
    """The campaign's source seal in-process; with `root`, as `python -m harness` run from
    `root` makes it (with the project's copy of the harness, `with_harness`)."""
    if root is not None:
        code = ("import sys; from pathlib import Path; from harness.config.loader import "
                "require_campaign as r; from harness.measure.seal import source_seal as s; "
                "l = r(Path(sys.argv[1])); print(s(l.project_dir, l.files()).digest)")
        return subprocess.run([sys.executable, "-c", code, str(campaign)], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
    loaded = require_campaign(campaign)
    return source_seal(loaded.project_dir, loaded.files()).digest


def gate_record(folder: Path, campaign: str, seal: str, *, passed: bool = True,
                commit: str | None = None, clean: bool = True, v1: bool = False) -> Path:
    """A minimal sealed gate record (the shape harness.judge.gaterecord.gatesjson reads): v2,
    its gates run from `commit` (clean or not), or a v1 record, which says nothing of its
    tree."""
    folder.mkdir(parents=True)
    gate = {"name": "unit", "argv": ["true"], "exit_code": 0 if passed else 1,
            "passed": passed, "duration_s": 0.1, "counts": None, "kill_score": None,
            "min_kill_score": None, "why": None if passed else "exit 1"}
    doc = {"schema": "harness.gates/v2", "campaign": {"name": campaign, "file": "x.yaml"},
           "source_seal": seal, "passed": passed, "gates": [gate], "refusals": [],
           "git": {"commit": commit, "clean": clean,
                   "problems": [] if clean else ["x.py: differs from HEAD"],
                   "problems_total": 0 if clean else 1},
           "times": {"started": "2026-11-30T00:00:00Z", "ended": "2026-11-30T00:00:01Z"}}
    if v1:
        doc.update(schema="harness.gates/v1", git={})
        del doc["refusals"]
    (folder / "gates.json").write_text(json.dumps(doc))
    write_manifest(folder)
    return folder


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def with_harness(root: Path) -> Path:
    """Put a copy of the harness package in the project `root`, as in the real checkout
    (where campaigns and the harness are one repository): "clean at commit X" covers every
    sealed byte, the harness's own included, so a project outside the harness's checkout is
    never clean. A subprocess run from `root` imports this copy; in-process tests point
    the seal at it with `harness_of`."""
    shutil.copytree(PACKAGE_DIR, root / "harness",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    ignore = root / ".gitignore"
    text = ignore.read_text() if ignore.exists() else ""
    ignore.write_text(text + "__pycache__/\n*.pyc\n")
    return root / "harness"


def harness_of(monkeypatch, root: Path) -> None:
    """The source seal of in-process calls reads the project's copy of the harness."""
    monkeypatch.setattr(seal_module, "PACKAGE_DIR", with_harness(root))


def make_keys(tmp: Path, name: str, signers_dir: Path | None = None) -> tuple[Path, Path]:
    """An ed25519 key pair and an allowed_signers file trusting it for approvals (in
    `signers_dir`, e.g. the project, where a campaign's sealed signers file must be)."""
    key, line = signer(tmp, name, NAMESPACE)
    allowed = (signers_dir or tmp) / f"{name}.allowed"
    allowed.write_text(line)
    return key, allowed


ONE_CONTROL_IMAGE = "sha256:" + "1" * 64
ONE_CONTROL_CAMPAIGN = "campaigns/camp.yaml"


def one_control_project(root: Path, monkeypatch, campaign_tail: str,
                        ignored: tuple[str, ...] = ("runs/",)) -> Path:
    """A git project holding the harness (as the real checkout does), an images.lock, one
    control `ctl` and the campaign `camp` of it, whose last lines are `campaign_tail`;
    `ignored` goes into .gitignore. Returns the campaign file, all committed."""
    harness_of(monkeypatch, root)
    for folder in ("campaigns", "controls"):
        (root / folder).mkdir()
    (root / "images.lock").write_text(f"images:\n  rehearsal:\n    id: {ONE_CONTROL_IMAGE}\n")
    (root / "controls" / "ctl.yaml").write_text(
        "name: ctl\nimage: rehearsal\ndevice: cpu\ncommand: [\"true\"]\n")
    (root / ONE_CONTROL_CAMPAIGN).write_text(
        f"name: camp\nrow: T\ncontrols: [ctl]\n{campaign_tail}")
    with (root / ".gitignore").open("a") as f:
        f.write("".join(f"{line}\n" for line in ignored))
    commit_all(root)
    return root / ONE_CONTROL_CAMPAIGN

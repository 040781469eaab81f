"""Approvals with the harness installed from its wheel, in an operator's own repository.

The harness's own bytes are in no commit of the operator's repository: its distribution's
RECORD vouches for them (harness.measure.origin). From a folder that is not the
repository: the campaign's gates (the installed `harness selftest`) make a gate record
naming the installed distribution, `harness approve` issues an approval naming it, and a
run under `require_approval` is accepted under it; then one installed file edited (or one
added to the package) makes the next run refuse before the GPU lock, naming the file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.installed.conftest import CampaignRepo, Installed, make_campaign_repo

CONTROL = "rehearsal-compute"


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def run_folders(repo: CampaignRepo) -> set[Path]:
    runs = repo.runs_dir
    return {p for p in runs.iterdir() if (p / "run.json").exists()} if runs.is_dir() else set()


@pytest.fixture(scope="module")
def approving(installed: Installed, rehearsal_image: str,
              tmp_path_factory: pytest.TempPathFactory) -> CampaignRepo:
    """A repository whose rehearsal campaign requires an approval and lists the installed
    harness's own Gate-0 cases as its gate."""
    repo = make_campaign_repo(installed, tmp_path_factory.mktemp("approving") / "repo",
                              rehearsal_image)
    path = repo.root / "campaigns" / "rehearsal.yaml"
    campaign = yaml.safe_load(path.read_text())
    campaign["require_approval"] = True
    campaign["gates"] = [{"name": "gate0-cases", "timeout": "5m",
                          "run": ["harness", "selftest", "--junitxml", "{gate_dir}/junit.xml"],
                          "expect": {"junit": "junit.xml", "min_tests": 10}}]
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    repo.commit("require an approval, gated on the installed harness's selftest")
    return repo


def _record_sha256(installed: Installed) -> str:
    [record] = installed.site_packages.glob("harness-*.dist-info/RECORD")
    return "sha256:" + hashlib.sha256(record.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Approved:
    repo: CampaignRepo
    gates: dict  # the gate record's gates.json
    approval: Path
    refused_first: str  # what `harness run` said before any approval


@pytest.fixture(scope="module")
def approved(approving: CampaignRepo, tmp_path_factory: pytest.TempPathFactory) -> Approved:
    """From a folder that is not the repository: a run refused for want of an approval,
    the gates, the approval, committed."""
    campaign = str(approving.root / "campaigns" / "rehearsal.yaml")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    before = run_folders(approving)
    r = approving.harness("run", campaign, "--control", CONTROL, cwd=elsewhere)
    assert r.returncode == 1 and "SEAL-NOT-APPROVED" in r.stderr, r.stdout + r.stderr
    assert run_folders(approving) == before  # refused before any folder exists
    refused_first = r.stderr

    r = approving.harness("gates", campaign, cwd=elsewhere, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    [record] = sorted((approving.runs_dir / "gates").iterdir())
    r = approving.harness("approve", campaign, "--gates", str(record), "--reviewer",
                          "ops@example.invalid", cwd=elsewhere)
    assert r.returncode == 0, r.stdout + r.stderr
    [approval] = sorted((approving.root / "approvals").glob("rehearsal-*.json"))
    approving.commit("the approval")
    assert list(elsewhere.iterdir()) == []
    return Approved(approving, read_json(record / "gates.json"), approval, refused_first)


def test_gates_approve_and_a_run_under_the_approval(approved: Approved, installed: Installed,
                                                    tmp_path: Path):
    repo, gates = approved.repo, approved.gates
    assert "SEAL-NOT-APPROVED" in approved.refused_first
    assert gates["passed"] and gates["git"]["clean"], gates["git"]
    assert gates["harness"]["mode"] == "installed"
    assert gates["harness"]["record_sha256"] == _record_sha256(installed)
    doc = read_json(approved.approval)
    assert doc["harness"]["distribution"] == "harness"
    assert doc["harness"]["mode"] == "installed"
    assert doc["harness"]["version"] == gates["harness"]["version"]
    assert doc["harness"]["record_sha256"] == _record_sha256(installed)

    before = run_folders(repo)
    r = repo.harness("run", str(repo.root / "campaigns" / "rehearsal.yaml"), "--control",
                     CONTROL, "--no-json-lines", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    [run] = sorted(run_folders(repo) - before)
    record_doc = read_json(run / "run.json")
    assert record_doc["status"] == "accepted", record_doc["reasons"]
    assert record_doc["approval"]["file"] == f"approvals/{approved.approval.name}"
    assert record_doc["harness"]["mode"] == "installed"
    assert record_doc["harness"]["record_sha256"] == _record_sha256(installed)

    r = repo.harness("--version", cwd=tmp_path)
    assert r.returncode == 0
    assert f"installed at {installed.site_packages}" in r.stdout, r.stdout


@pytest.mark.parametrize("change", ["edit", "add"])
def test_an_installed_file_changed_refuses_before_the_lock(approved: Approved,
                                                           installed: Installed, change: str):
    """The venv is shared by the session, so the file is put back whatever happens."""
    approving = approved.repo
    target = installed.site_packages / "harness" / "judge" / (
        "verdict.py" if change == "edit" else "planted.py")
    original = target.read_bytes() if target.exists() else None
    lock = Path(yaml.safe_load((approving.root / "campaigns" / "rehearsal.yaml")
                               .read_text())["lock"])
    lock_before = lock.stat().st_mtime_ns if lock.exists() else None
    before = run_folders(approving)
    try:
        with target.open("ab") as f:
            f.write(b"\n# changed after install\n")
        r = approving.harness("run", "campaigns/rehearsal.yaml", "--control", CONTROL)
    finally:
        if original is None:
            target.unlink()
        else:
            target.write_bytes(original)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "PROVENANCE-DIRTY" in r.stderr, r.stderr
    why = "differs from the distribution's RECORD" if change == "edit" else \
        "not in the distribution's RECORD"
    assert f"harness/judge/{target.name}: {why}" in r.stderr, r.stderr
    assert run_folders(approving) == before
    assert (lock.stat().st_mtime_ns if lock.exists() else None) == lock_before

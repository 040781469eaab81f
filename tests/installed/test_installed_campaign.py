"""The rehearsal campaign run by the installed harness from an operator's own repository.

The repository is made by `harness init` (conftest.campaign_repo), with the rehearsal's
controls and campaign copied in and the rehearsal image pinned by the installed
`harness images pin`. From there: the seed's case refused by Gate 0 in the engine core
(the observer loaded from the installed wheel inside the container), its pair and the
plain control accepted, each run verified; a night with its morning summary, bundled and
the bundle verified; and the seed's case again from a folder that is not the repository,
landing in the repository's runs dir.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.installed.conftest import NIGHT_CONTROLS, REHEARSAL_CONTROLS, CampaignRepo

SEED, PAIR, PLAIN = "rehearsal-gate0", "rehearsal-gate0-inproc", "rehearsal-compute"
assert set(REHEARSAL_CONTROLS) == {SEED, PAIR, PLAIN}


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def sealed_runs(runs_dir: Path) -> set[Path]:
    if not runs_dir.is_dir():
        return set()
    return {p for p in runs_dir.iterdir() if (p / "run.json").is_file()}


@dataclass(frozen=True)
class Ran:
    """One command's result and the run folders it sealed, by control."""

    proc: subprocess.CompletedProcess
    runs: dict[str, Path]

    def record(self, control: str) -> dict:
        return read_json(self.runs[control] / "run.json")


def run_and_collect(repo: CampaignRepo, *args: str, cwd: Path | None = None,
                    timeout: float = 600) -> Ran:
    before = sealed_runs(repo.runs_dir)
    proc = repo.harness(*args, cwd=cwd, timeout=timeout)
    made = sorted(sealed_runs(repo.runs_dir) - before)
    runs = {read_json(p / "run.json")["control"]["name"]: p for p in made}
    assert len(runs) == len(made), f"two runs of one control: {made}"
    return Ran(proc, runs)


def assert_seed_case_refused(record: dict, run: Path) -> None:
    """Refused for GATE0-FIELD-DIFFERS on compilation.custom_ops, first in the engine core;
    never GATE0-MISSING (the observer not loaded in some process)."""
    assert record["status"] == "refused", record["reasons"]
    assert record["rules"] == ["GATE0-FIELD-DIFFERS"], record["reasons"]
    verdict = read_json(run / "post-steps" / "gate0" / "verdict.json")
    found = [(d["process"], d["field"]) for d in verdict["differences"]]
    assert found and found[0] == ("engine-core", "compilation.custom_ops"), found
    assert {field for _, field in found} == {"compilation.custom_ops"}, found


@pytest.fixture(scope="module")
def rehearsal(campaign_repo: CampaignRepo) -> Ran:
    """`harness run campaigns/rehearsal.yaml` from the repository's root, once."""
    ran = run_and_collect(campaign_repo, "run", "campaigns/rehearsal.yaml", "--no-json-lines")
    if sorted(ran.runs) != sorted(REHEARSAL_CONTROLS):
        pytest.fail(f"harness run sealed {sorted(ran.runs)}, not {sorted(REHEARSAL_CONTROLS)} "
                    f"(exit {ran.proc.returncode}):\n{ran.proc.stdout}\n{ran.proc.stderr}",
                    pytrace=False)
    return ran


def test_the_repository_checks(campaign_repo: CampaignRepo):
    root = campaign_repo.root
    files = [str(p.relative_to(root)) for p in
             sorted(root.glob("campaigns/*.yaml")) + sorted(root.glob("controls/*.yaml"))]
    r = campaign_repo.harness("check", *files, "images.lock")
    assert r.returncode == 0, r.stdout + r.stderr
    r = campaign_repo.harness("images", "verify", "rehearsal")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_seed_case_is_refused_and_its_pair_accepted(rehearsal: Ran):
    assert rehearsal.proc.returncode == 1, rehearsal.proc.stderr  # one refusal, on purpose
    assert_seed_case_refused(rehearsal.record(SEED), rehearsal.runs[SEED])
    for control in (PAIR, PLAIN):
        record = rehearsal.record(control)
        assert record["status"] == "accepted", (control, record["reasons"])
    pair = read_json(rehearsal.runs[PAIR] / "post-steps" / "gate0" / "verdict.json")
    assert pair["differences"] == []


def test_each_run_verifies(campaign_repo: CampaignRepo, rehearsal: Ran):
    for control, run in rehearsal.runs.items():
        r = campaign_repo.harness("verify", str(run))
        assert r.returncode == 0, (control, r.stdout + r.stderr)


def test_a_night_its_summary_and_its_bundle(campaign_repo: CampaignRepo, tmp_path: Path):
    nights = campaign_repo.runs_dir / "nights"
    before = set(nights.iterdir()) if nights.is_dir() else set()
    ran = run_and_collect(campaign_repo, "night", "campaigns/rehearsal-night.yaml",
                          "--no-json-lines")
    assert ran.proc.returncode == 0, ran.proc.stdout + ran.proc.stderr
    assert sorted(ran.runs) == sorted(NIGHT_CONTROLS)
    [night] = sorted(set(nights.iterdir()) - before)
    summary = (night / "summary.md").read_text()
    for control in NIGHT_CONTROLS:
        assert control in summary, control
    bundle = tmp_path / "night.tar.gz"
    r = campaign_repo.harness("bundle", "export", str(night), "-o", str(bundle))
    assert r.returncode == 0, r.stdout + r.stderr
    r = campaign_repo.harness("bundle", "verify", str(bundle))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(NIGHT_CONTROLS)} run(s)" in r.stdout


def test_from_another_folder_the_run_lands_in_the_repository(
        campaign_repo: CampaignRepo, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    campaign = campaign_repo.root / "campaigns" / "rehearsal.yaml"
    ran = run_and_collect(campaign_repo, "run", str(campaign), "--control", SEED,
                          "--no-json-lines", cwd=elsewhere)
    assert ran.proc.returncode == 1, ran.proc.stdout + ran.proc.stderr
    assert list(ran.runs) == [SEED], (
        f"no run of {SEED} in {campaign_repo.runs_dir}; {elsewhere} holds "
        f"{sorted(p.name for p in elsewhere.rglob('*'))}")
    assert_seed_case_refused(ran.record(SEED), ran.runs[SEED])
    assert list(elsewhere.iterdir()) == []
    r = campaign_repo.harness("verify", str(ran.runs[SEED]), cwd=elsewhere)
    assert r.returncode == 0, r.stdout + r.stderr

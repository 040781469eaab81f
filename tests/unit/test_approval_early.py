"""The approval check before any run folder exists (`approval.early`): the next step per
rule, the one error it raises, the paths it shows, and `harness run` / `harness rerun` on a
real git project refusing a seal no approval covers with nothing written."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from harness.base import catalogue
from harness.base.catalogue import (
    APPROVAL_GATES_MISSING,
    APPROVAL_OTHER_SEAL,
    APPROVAL_SIGNATURE,
    ENV_ERROR,
    PROVENANCE_DIRTY,
    SEAL_NOT_APPROVED,
)
from harness.base.errors import EnvironmentFault, Refused, ruled
from harness.base.reason import Reason
from harness.base.states import Status
from harness.cli.main import _run as harness_cli
from harness.config.loader import require_campaign
from harness.driver.rerun import RerunPlan, execute
from harness.judge.approval import early
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.seal import source_seal
from harness.measure.ui import Reporter
from harness.probe.approval import write
from harness.probe.approval.runcheck import before_run
from tests.approval_helpers import (
    ONE_CONTROL_CAMPAIGN,
    ONE_CONTROL_IMAGE,
    gate_record,
    head,
    one_control_project,
    seal_of,
)

SEAL = "sha256:" + "ab" * 32
IMG = ONE_CONTROL_IMAGE
CAMPAIGN = ONE_CONTROL_CAMPAIGN
APPROVAL = "approvals/camp-abababababab.json"


def steps(rules: list[str], runs_dir: str | None = "runs") -> list[str]:
    return early.next_steps(rules, CAMPAIGN, SEAL, runs_dir, APPROVAL)


# ---- next_steps: pure --------------------------------------------------------------------

@pytest.mark.parametrize("rule", sorted(early.NEXT))
def test_every_rule_with_a_next_step_gets_one_filled_in(rule):
    [step] = steps([rule])
    assert "{" not in step and "}" not in step  # every placeholder filled
    if "{gates}" in early.NEXT[rule]:
        assert f"`harness gates {CAMPAIGN} --runs-dir runs`" in step
        assert f"`harness approve {CAMPAIGN} --gates RECORD`" in step
        assert f"for seal {SEAL}" in step
    if "{file}" in early.NEXT[rule]:
        assert f"remove {APPROVAL} in a commit" in step


def test_every_next_step_names_a_catalogued_rule():
    assert set(early.NEXT) <= set(catalogue.RULES)


def test_rules_of_one_step_give_it_once_and_the_rules_order_is_kept():
    new_seal = steps([SEAL_NOT_APPROVED])[0]
    dirty = steps([PROVENANCE_DIRTY])[0]
    assert steps([SEAL_NOT_APPROVED, APPROVAL_OTHER_SEAL, SEAL_NOT_APPROVED]) == [new_seal]
    assert steps([PROVENANCE_DIRTY, SEAL_NOT_APPROVED]) == [dirty, new_seal]
    assert steps([SEAL_NOT_APPROVED, PROVENANCE_DIRTY]) == [new_seal, dirty]


def test_a_rule_without_a_next_step_adds_none():
    assert ENV_ERROR not in early.NEXT
    assert steps([ENV_ERROR]) == []
    assert steps([ENV_ERROR, PROVENANCE_DIRTY]) == steps([PROVENANCE_DIRTY])


def test_without_a_runs_dir_the_gates_command_names_none():
    [step] = steps([SEAL_NOT_APPROVED], runs_dir=None)
    assert f"`harness gates {CAMPAIGN}`" in step and "--runs-dir" not in step


def test_the_signature_step_says_to_sign_and_the_missing_record_step_the_runs_dir():
    assert "--sign-key" in steps([APPROVAL_SIGNATURE])[0]
    assert steps([APPROVAL_GATES_MISSING])[0].startswith("run with the --runs-dir")


# ---- refusal: pure -----------------------------------------------------------------------

def refusal(reasons: list[Reason]):
    return early.refusal(reasons, CAMPAIGN, SEAL, "runs", APPROVAL)


def test_no_reasons_is_no_refusal():
    assert refusal([]) is None


def test_a_refusal_names_its_first_rule_once_and_ends_with_the_next_step():
    error = refusal([Reason(SEAL_NOT_APPROVED, "no approval of seal x"),
                     Reason(PROVENANCE_DIRTY, "notes.txt: not tracked")])
    assert isinstance(error, Refused) and error.rule == SEAL_NOT_APPROVED
    shown = ruled(error.rule, error.message)  # as the CLI prints it
    assert shown.count(SEAL_NOT_APPROVED) == 1 and shown.count(PROVENANCE_DIRTY) == 1
    assert shown.startswith(f"[{SEAL_NOT_APPROVED}] no approval of seal x; ")
    assert "nothing was run or written. Next: " in error.message
    expected = "; or ".join(steps([SEAL_NOT_APPROVED, PROVENANCE_DIRTY]))
    assert error.message.endswith(f"Next: {expected}")


def test_two_reasons_of_one_rule_name_it_once():
    error = refusal([Reason(APPROVAL_OTHER_SEAL, "a.json: approved x"),
                     Reason(APPROVAL_OTHER_SEAL, "b.json: approved y")])
    shown = ruled(error.rule, error.message)
    assert shown.count(APPROVAL_OTHER_SEAL) == 1
    assert "a.json: approved x; b.json: approved y" in shown


def test_a_host_fault_is_an_environment_fault_with_no_invented_step():
    error = refusal([Reason(ENV_ERROR, "ssh-keygen is not installed")])
    assert isinstance(error, EnvironmentFault) and error.code == 3
    assert error.message.endswith("nothing was run or written")
    mixed = refusal([Reason(APPROVAL_SIGNATURE, "bad"), Reason(ENV_ERROR, "no ssh-keygen")])
    assert isinstance(mixed, EnvironmentFault) and mixed.rule == APPROVAL_SIGNATURE


def test_a_post_step_naming_an_env_rule_cannot_make_it_the_host_s_fault():
    error = refusal([Reason(ENV_ERROR, "claimed", by="some-step")])
    assert type(error) is Refused and error.code == 1


# ---- shown_path: pure --------------------------------------------------------------------

def test_a_path_below_the_cwd_is_shown_relative(tmp_path):
    assert early.shown_path(tmp_path / "campaigns" / "c.yaml", tmp_path) == "campaigns/c.yaml"
    assert early.shown_path(tmp_path / "a" / ".." / "b.yaml", tmp_path) == "b.yaml"


def test_a_path_outside_the_cwd_is_shown_whole(tmp_path):
    outside = tmp_path / "elsewhere" / "c.yaml"
    assert early.shown_path(outside, tmp_path / "proj") == str(outside)


def test_a_relative_path_is_read_from_the_process_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert early.shown_path(Path("campaigns/c.yaml"), tmp_path) == "campaigns/c.yaml"


@pytest.mark.parametrize("name", ["my camp.yaml", "c;touch pwned.yaml", "$(touch pwned).yaml",
                                  "it's `x`.yaml", "tab\there.yaml"])
def test_a_hostile_path_is_one_shell_word_that_runs_nothing(tmp_path, name):
    shown = early.shown_path(tmp_path / "campaigns" / name, tmp_path)
    assert shown != f"campaigns/{name}"  # it needed quoting
    assert shlex.split(shown) == [f"campaigns/{name}"]
    out = subprocess.run(["sh", "-c", f"printf %s {shown}"], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    assert out == f"campaigns/{name}"
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned.yaml").exists()


# ---- before_run on a real project ---------------------------------------------------------

def make_project(root: Path, monkeypatch, *, require: bool = True) -> Path:
    """A git project holding the harness and a campaign of one control, requiring approval
    unless `require` is False."""
    return one_control_project(root, monkeypatch,
                               f"require_approval: {str(require).lower()}\n",
                               ignored=("runs/", "runs2/"))


@pytest.fixture
def proj(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "proj"
    make_project(root, monkeypatch)
    monkeypatch.chdir(root)
    return root


def tree(root: Path) -> set[str]:
    """Every path under `root` but git's own, to see that nothing was written."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.parts}


def approve(root: Path) -> Path:
    record = gate_record(root / "runs" / "gates" / "camp-g", "camp", seal_of(root / CAMPAIGN),
                         commit=head(root))
    return write.approve(require_campaign(root / CAMPAIGN), record, "rev@example", None)[0]


def test_before_run_refuses_an_unapproved_seal_naming_the_next_step(proj):
    loaded = require_campaign(proj / CAMPAIGN)
    seal = seal_of(proj / CAMPAIGN)
    with pytest.raises(Refused) as e:
        before_run(loaded, proj / "runs")
    assert e.value.rule == SEAL_NOT_APPROVED
    assert e.value.message.endswith(
        f"Next: run `harness gates {CAMPAIGN} --runs-dir runs` then "
        f"`harness approve {CAMPAIGN} --gates RECORD` for seal {seal}")
    assert not (proj / "runs").exists()


def test_before_run_names_the_seal_it_is_given(proj):
    loaded = require_campaign(proj / CAMPAIGN)
    with pytest.raises(Refused) as e:
        before_run(loaded, proj / "runs", seal=SEAL)
    assert e.value.message.endswith(f"for seal {SEAL}")


def test_before_run_passes_an_approved_seal_and_a_campaign_needing_none(proj, tmp_path,
                                                                        monkeypatch):
    approve(proj)
    assert before_run(require_campaign(proj / CAMPAIGN), proj / "runs") is None
    other = tmp_path / "other"
    make_project(other, monkeypatch, require=False)
    assert before_run(require_campaign(other / CAMPAIGN), None) is None


def test_before_run_on_a_dirty_approved_checkout_says_to_commit(proj):
    approve(proj)
    (proj / "notes.txt").write_text("uncommitted\n")
    with pytest.raises(Refused) as e:
        before_run(require_campaign(proj / CAMPAIGN), proj / "runs")
    assert e.value.rule == PROVENANCE_DIRTY and "notes.txt" in e.value.message
    assert e.value.message.endswith("Next: commit (or remove) what is not clean, or reinstall "
                                    "an edited installed harness from its wheel, then run again")


def test_harness_run_refuses_before_any_folder_and_says_the_rule_once(proj, capsys):
    before = tree(proj)
    code = harness_cli(["run", CAMPAIGN, "--runs-dir", "runs"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert tree(proj) == before  # no runs dir, no run folder, no lock file
    assert err.count(SEAL_NOT_APPROVED) == 1 and err.startswith(f"harness: [{SEAL_NOT_APPROVED}]")
    assert f"`harness gates {CAMPAIGN} --runs-dir runs`" in err


def test_harness_run_shows_a_hostile_runs_dir_quoted(proj, capsys):
    code = harness_cli(["run", CAMPAIGN, "--runs-dir", "my runs;x"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "--runs-dir 'my runs;x'`" in err and not (proj / "my runs;x").exists()


def sealed_original(root: Path, runs: Path) -> Path:
    """A sealed run folder of the campaign's control, as `harness run` leaves one (the
    fields a rerun reads), so `harness rerun` plans from it."""
    folder = runs / "ctl-20261130T000000Z-0000abcd"
    folder.mkdir(parents=True)
    rec = run_record.RunRecord(
        run_id=folder.name, status=Status.REFUSED, attempt=1,
        campaign={"name": "camp", "file": str(root / CAMPAIGN), "row": "T"},
        control={"name": "ctl", "file": str(root / "controls" / "ctl.yaml"), "device": "cpu"},
        image={"name": "rehearsal", "id": IMG}, seal=seal_of(root / CAMPAIGN),
        times={"created": "2026-11-30T00:00:00Z"})
    run_record.write(folder, rec)
    write_manifest(folder)
    return folder


def test_harness_rerun_refuses_before_any_folder_or_index(proj, capsys):
    original = sealed_original(proj, proj / "runs")
    before = tree(proj)
    code = harness_cli(["rerun", str(original), "--reason", "after a fix",
                        "--campaign", CAMPAIGN, "--runs-dir", "runs2"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"[{SEAL_NOT_APPROVED}]" in err and err.count(SEAL_NOT_APPROVED) == 1
    assert "nothing was run or written. Next: " in err
    assert tree(proj) == before  # no runs2, no rerun folder, no reruns.jsonl
    assert sorted(os.listdir(proj / "runs")) == [original.name]


def test_rerun_execute_refuses_under_the_plan_s_seal_before_its_runs_dir(proj, tmp_path):
    loaded = require_campaign(proj / CAMPAIGN)
    seal = source_seal(loaded.project_dir, loaded.files())
    original = run_record.RunRecord(run_id="ctl-x", status=Status.REFUSED, seal=seal.digest)
    plan = RerunPlan(tmp_path / "runs" / "ctl-x", original, loaded, "ctl", seal, None)
    runs = tmp_path / "fresh-runs"
    with pytest.raises(Refused) as e:
        execute(plan, "after a fix", ui=Reporter(), runs_dir=runs)
    assert e.value.rule == SEAL_NOT_APPROVED and f"for seal {seal.digest}" in e.value.message
    assert not runs.exists()

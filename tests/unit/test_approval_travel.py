"""Approvals that travel: the gate record is named by its folder name and found only in the
runs dir in use (RUNS/gates/<name>), so an approval made on one host verifies on another
that holds the record, and a name never leads out of that folder; `harness approve` warns
when the reviewer is not the signing principal; a partial gate record says it cannot carry
an approval. Real git projects, real `harness gates`, real ssh-keygen; no Docker."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.base.catalogue import (
    APPROVAL_GATES_FAILED,
    APPROVAL_GATES_MISSING,
    APPROVAL_SIGNATURE,
)
from harness.base.errors import InvalidInput, Refused
from harness.cli.main import _run as harness_cli
from harness.config.loader import require_campaign
from harness.judge.approval import basis as approval_gates
from harness.judge.approval.issue import reviewer_mismatch
from harness.judge.approval.signature import SignatureCheck
from harness.judge.gaterecord.gatelines import headline
from harness.measure import seal as seal_module
from harness.probe.approval import runcheck, write
from harness.probe.gaterun import run_gates
from tests.approval_helpers import (
    GIT_ENV,
    ONE_CONTROL_CAMPAIGN,
    ONE_CONTROL_IMAGE,
    commit_all,
    gate_record,
    head,
    make_keys,
    one_control_project,
)
from tests.approval_helpers import seal_of as seal_now

IMG = ONE_CONTROL_IMAGE
CAMPAIGN = ONE_CONTROL_CAMPAIGN
GATE = "  - name: {}\n    run: [\"true\"]\n    timeout: 30\n"


def make_project(root: Path, monkeypatch, *, gates: tuple[str, ...] = ("unit",),
                 extra: str = "") -> Path:
    """A git project holding the harness, one control, and a campaign requiring approval
    whose gates each run `true`."""
    listed = "gates:\n" + "".join(GATE.format(name) for name in gates) if gates else ""
    return one_control_project(root, monkeypatch, f"require_approval: true\n{listed}{extra}")


def rules(root: Path, runs_dir: Path | None) -> list[str]:
    loaded = require_campaign(root / CAMPAIGN)
    return [r.rule for r in runcheck.for_run(loaded, seal_now(root / CAMPAIGN),
                                          runs_dir=runs_dir)[1]]


def gates_and_approve(root: Path) -> tuple[Path, Path]:
    """`harness gates` into root/runs, then `harness approve` on its record: (the record
    folder, the approval file)."""
    loaded = require_campaign(root / CAMPAIGN)
    folder, doc, code = run_gates(loaded, root / "runs")
    assert code == 0 and doc["passed"] and doc["git"]["clean"], doc
    path, _ = write.approve(loaded, folder, "rev@example", None)
    return folder, path


def rewrite_record(approval: Path, named: str) -> None:
    doc = json.loads(approval.read_text())
    doc["gates"]["record"] = named
    approval.write_text(json.dumps(doc))


# ---- the record travels by name ------------------------------------------------------------

def test_the_approval_names_its_record_by_folder_name_only(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    make_project(root, monkeypatch)
    folder, approval = gates_and_approve(root)
    named = json.loads(approval.read_text())["gates"]["record"]
    assert named == folder.name and "/" not in named and str(tmp_path) not in approval.read_text()
    assert rules(root, root / "runs") == []


def test_an_approval_made_on_one_host_passes_on_another_holding_the_record(tmp_path,
                                                                           monkeypatch):
    host_a = tmp_path / "host-a" / "proj"
    host_a.parent.mkdir()
    make_project(host_a, monkeypatch)
    folder, approval = gates_and_approve(host_a)
    commit_all(host_a, "approve")  # the approval is committed for every reviewer
    host_b = tmp_path / "host-b" / "checkout"
    subprocess.run(["git", "clone", "-q", str(host_a), str(host_b)], check=True, env=GIT_ENV)
    other_runs = tmp_path / "host-b" / "scratch" / "runs"
    shutil.copytree(folder, other_runs / "gates" / folder.name)
    host_a.parent.rename(tmp_path / "host-a-gone")  # nothing of host A's paths is left
    monkeypatch.setattr(seal_module, "PACKAGE_DIR", host_b / "harness")
    loaded = require_campaign(host_b / CAMPAIGN)
    named, reasons = runcheck.for_run(loaded, seal_now(host_b / CAMPAIGN), runs_dir=other_runs)
    assert reasons == []
    assert named is not None and named["file"] == f"approvals/{approval.name}"
    runcheck.before_run(loaded, other_runs)  # and `harness run` there would start


def test_without_the_record_in_the_runs_dir_the_refusal_says_where_it_looked(tmp_path,
                                                                           monkeypatch):
    root = tmp_path / "proj"
    make_project(root, monkeypatch)
    folder, _ = gates_and_approve(root)
    empty = tmp_path / "empty-runs"
    loaded = require_campaign(root / CAMPAIGN)
    _, reasons = runcheck.for_run(loaded, seal_now(root / CAMPAIGN), runs_dir=empty)
    assert [r.rule for r in reasons] == [APPROVAL_GATES_MISSING]
    assert folder.name in reasons[0].detail and str(empty / "gates") in reasons[0].detail
    assert rules(root, None) == [APPROVAL_GATES_MISSING]
    with pytest.raises(Refused) as e:
        runcheck.before_run(loaded, empty)
    assert e.value.message.endswith(f"run with the --runs-dir that holds its gate record, "
                                    f"or remove approvals/{_approval_name(root)} in a commit, "
                                    f"then run `harness gates {root / CAMPAIGN} --runs-dir "
                                    f"{empty}` then `harness approve {root / CAMPAIGN} --gates "
                                    f"RECORD` for seal {seal_now(root / CAMPAIGN)}")


def _approval_name(root: Path) -> str:
    [path] = (root / "approvals").iterdir()
    return path.name


@pytest.mark.parametrize("how", ["dot-dot", "absolute"])
def test_a_record_path_never_leads_out_of_the_runs_dir(tmp_path, monkeypatch, how):
    """A hand-edited (or older) approval naming its record by `../` or an absolute path:
    the record there is the approved one, intact, yet only RUNS/gates/<last part> is
    looked at, so the path is refused until the record is in the runs dir."""
    root = tmp_path / "proj"
    make_project(root, monkeypatch)
    folder, approval = gates_and_approve(root)
    outside = tmp_path / "outside" / "gates" / folder.name
    outside.parent.mkdir(parents=True)
    folder.rename(outside)  # the intact record, moved out of the runs dir
    runs = root / "runs"
    named = (f"../../../outside/gates/{folder.name}" if how == "dot-dot" else str(outside))
    monkeypatch.chdir(runs / "gates")  # where `../../../outside/...` leads
    assert (Path(named) if how == "absolute" else Path.cwd() / named).is_dir()
    rewrite_record(approval, named)
    loaded = require_campaign(root / CAMPAIGN)
    _, reasons = runcheck.for_run(loaded, seal_now(root / CAMPAIGN), runs_dir=runs)
    assert [r.rule for r in reasons] == [APPROVAL_GATES_MISSING]
    assert f"gate record {folder.name} is not in {runs / 'gates'}" in reasons[0].detail
    shutil.copytree(outside, runs / "gates" / folder.name)  # now it is in the runs dir
    assert rules(root, runs) == []


@pytest.mark.parametrize("named", ["..", ".", "../..", "/", "", "gates/..", "-x", "a\\b",
                                   "a\x00b", "x" * 201])
def test_a_record_name_that_is_no_name_is_refused(tmp_path, monkeypatch, named):
    root = tmp_path / "proj"
    make_project(root, monkeypatch)
    _, approval = gates_and_approve(root)
    rewrite_record(approval, named)
    loaded = require_campaign(root / CAMPAIGN)
    _, reasons = runcheck.for_run(loaded, seal_now(root / CAMPAIGN), runs_dir=root / "runs")
    assert [r.rule for r in reasons] == [APPROVAL_GATES_MISSING]
    assert "is not a record name" in reasons[0].detail and len(reasons[0].detail) < 600


def test_a_record_in_the_runs_dir_that_is_a_symlink_is_not_followed(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    make_project(root, monkeypatch)
    folder, _ = gates_and_approve(root)
    elsewhere = tmp_path / "elsewhere"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere)
    assert rules(root, root / "runs") == [APPROVAL_GATES_MISSING]


def test_approve_refuses_a_record_not_in_a_gates_folder(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    make_project(root, monkeypatch)
    loaded = require_campaign(root / CAMPAIGN)
    folder = gate_record(root / "runs" / "loose", "camp", seal_now(root / CAMPAIGN),
                         commit=head(root))
    with pytest.raises(InvalidInput, match="not a gate record folder"):
        write.approve(loaded, folder, "rev@example", None)
    assert not (root / "approvals").exists()


@pytest.mark.parametrize("named, name", [("camp-g", "camp-g"), ("/srv/runs/gates/camp-g",
                                                                  "camp-g"),
                                         ("runs/gates/camp-g/", "camp-g"), ("..", None),
                                         ("x/..", None), (None, None), ("a\\b", None)])
def test_record_name_is_the_last_part_in_the_one_alphabet(named, name):
    assert approval_gates.record_name(named) == name


# ---- the reviewer and the signing principal ---------------------------------------------

def signed_project(tmp_path: Path, monkeypatch) -> tuple[Path, Path, Path]:
    """A project whose campaign trusts rev@example (its allowed_signers sealed in it), its
    gate record, and rev's private key (outside the project)."""
    root = tmp_path / "proj"
    root.mkdir()
    keys = tmp_path / "keys"
    keys.mkdir()
    key, _ = make_keys(keys, "rev", root)  # root/rev.allowed: rev@example
    make_project(root, monkeypatch, extra="allowed_signers: ../rev.allowed\n")
    folder, doc, code = run_gates(require_campaign(root / CAMPAIGN), root / "runs")
    assert code == 0, doc
    return root, folder, key


def approve_cli(root: Path, folder: Path, *extra: str) -> int:
    return harness_cli(["approve", str(root / CAMPAIGN), "--gates", str(folder), *extra])


def test_a_reviewer_who_is_not_the_signer_is_warned_on_both_streams(tmp_path, monkeypatch,
                                                                    capsys):
    root, folder, key = signed_project(tmp_path, monkeypatch)
    assert approve_cli(root, folder, "--sign-key", str(key), "--reviewer", "alice@example") == 0
    out, err = capsys.readouterr()
    warning = ("reviewer 'alice@example' is not the signing principal 'rev@example': runs and "
               "bundle verify trust the signer; name it with --reviewer rev@example")
    assert f"  warning: {warning}" in out and f"harness: warning: {warning}" in err
    assert "signed by rev@example (allowed_signers)" in out
    assert rules(root, root / "runs") == []  # the signature is good: runs trust the signer


def test_the_signer_as_reviewer_is_not_warned(tmp_path, monkeypatch, capsys):
    root, folder, key = signed_project(tmp_path, monkeypatch)
    assert approve_cli(root, folder, "--sign-key", str(key), "--reviewer", "rev@example") == 0
    out, err = capsys.readouterr()
    assert "warning" not in out + err and "signed by rev@example (allowed_signers)" in out


def test_an_unsigned_approval_has_no_principal_to_compare(tmp_path, monkeypatch, capsys):
    root, folder, _ = signed_project(tmp_path, monkeypatch)
    assert approve_cli(root, folder, "--reviewer", "alice@example") == 0
    out, err = capsys.readouterr()
    assert "warning" not in out + err and "reviewer alice@example; unsigned" in out
    assert rules(root, root / "runs") == [APPROVAL_SIGNATURE]  # allowed_signers wants one


def test_a_key_the_campaign_does_not_trust_is_warned_at_once(tmp_path, monkeypatch, capsys):
    root, folder, _ = signed_project(tmp_path, monkeypatch)
    stranger, _ = make_keys(tmp_path / "keys", "mallory")  # its .allowed file: unused
    assert approve_cli(root, folder, "--sign-key", str(stranger), "--reviewer",
                       "rev@example") == 0
    out, err = capsys.readouterr()
    assert "signed, but the signature does not verify against allowed_signers" in out
    assert "a run will refuse this approval (APPROVAL-SIGNATURE)" in err
    assert rules(root, root / "runs") == [APPROVAL_SIGNATURE]


@pytest.mark.parametrize("check_of, warned", [
    (None, None), (SignatureCheck(True, "ok", "rev@example"), None),
    (SignatureCheck(True, "ok", None), None),
    (SignatureCheck(True, "ok", "bob@example"), "not the signing principal 'bob@example'"),
    (SignatureCheck(False, "no principal matched"), "(no principal matched)")])
def test_reviewer_mismatch_is_pure(check_of, warned):
    got = reviewer_mismatch("rev@example", check_of)
    assert got is None if warned is None else warned in got


# ---- a partial gate record says so --------------------------------------------------------

def test_a_partial_record_headline_says_it_cannot_carry_an_approval(tmp_path, monkeypatch,
                                                                   capsys):
    root = tmp_path / "proj"
    make_project(root, monkeypatch, gates=("unit", "mutation", "image"))
    code = harness_cli(["gates", str(root / CAMPAIGN), "--runs-dir", str(root / "runs"),
                        "--only", "unit", "--only", "image"])
    out = capsys.readouterr().out
    assert code == 0, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("partial record (2 of 3 gates): cannot carry an approval "
                           "(not run: mutation); the gates that ran passed: "), last
    [folder] = (root / "runs" / "gates").iterdir()
    assert str(folder) in last
    with pytest.raises(Refused) as e:
        write.approve(require_campaign(root / CAMPAIGN), folder, "rev@example", None)
    assert e.value.rule == APPROVAL_GATES_FAILED and "mutation did not run" in e.value.message


def test_a_whole_record_headline_says_passed(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    make_project(root, monkeypatch, gates=("unit", "mutation"))
    assert harness_cli(["gates", str(root / CAMPAIGN), "--runs-dir", str(root / "runs")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("gates passed: ") and "partial" not in last


def test_headline_is_pure_and_says_a_failed_partial_record_failed():
    gates = [{"name": "unit", "passed": False}]
    doc = {"passed": False, "gates": gates}
    assert headline(doc, ["unit", "a", "b"]) == (
        "partial record (1 of 3 gates): cannot carry an approval (not run: a, b); the gates "
        "that ran FAILED")
    assert headline(doc, ["unit"]) == "gates FAILED"
    assert headline({"passed": True, "gates": gates}, ["unit"]) == "gates passed"

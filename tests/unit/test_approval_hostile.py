"""The approval chain against hostile approval files and folders, renamed
approvals, foreign signatures, a missing ssh-keygen, a gate planting junit.xml."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from harness.base.catalogue import APPROVAL_INVALID, APPROVAL_SIGNATURE, ENV_ERROR, PROVENANCE_DIRTY
from harness.config.gatelist import Gate
from harness.config.loader import require_campaign
from harness.measure.seal import source_seal
from harness.probe import gaterun as gates_run
from harness.probe.approval import runcheck, write
from tests.approval_helpers import commit_all, gate_record, harness_of, head, make_keys, seal_of

IMG = "sha256:" + "1" * 64


def _project(root: Path, name: str = "camp", extra: str = "") -> Path:
    for d in ("campaigns", "controls"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "images.lock").write_text(f"images:\n  rehearsal:\n    id: {IMG}\n")
    (root / "controls" / "ctl.yaml").write_text(
        "name: ctl\nimage: rehearsal\ndevice: cpu\ncommand: [\"true\"]\n")
    camp = root / "campaigns" / f"{name}.yaml"
    camp.write_text(f"name: {name}\nrow: T\ncontrols: [ctl]\nrequire_approval: true\n{extra}")
    with (root / ".gitignore").open("a") as f:
        f.write("runs/\n")
    return camp


@pytest.fixture
def proj(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "proj"
    harness_of(monkeypatch, root)
    _project(root)
    commit_all(root)
    return root


def campaign(root: Path, name: str = "camp") -> Path:
    return root / "campaigns" / f"{name}.yaml"


def approve(root: Path, name: str = "camp", key: Path | None = None) -> Path:
    gates = gate_record(root / "runs" / "gates" / f"{name}-g", name, seal_of(campaign(root, name)),
                        commit=head(root))
    path, _ = write.approve(require_campaign(campaign(root, name)), gates, "rev@example", key)
    return path


def reasons(root: Path, name: str = "camp") -> list:
    loaded = require_campaign(campaign(root, name))
    return runcheck.for_run(loaded, source_seal(root, loaded.files()).digest,
                         runs_dir=root / "runs")[1]


def rules(root: Path, name: str = "camp") -> list[str]:
    return [r.rule for r in reasons(root, name)]


def test_an_approval_that_is_a_symlink_is_refused(proj, tmp_path):
    path = approve(proj)
    real = tmp_path / "elsewhere.json"
    shutil.move(path, real)
    path.symlink_to(real)
    assert rules(proj) == [APPROVAL_INVALID]


def test_an_approval_that_is_a_fifo_is_refused_without_blocking(proj):
    path = approve(proj)
    path.unlink()
    os.mkfifo(path)
    assert rules(proj) == [APPROVAL_INVALID]


def test_a_huge_approval_is_refused(proj):
    path = approve(proj)
    path.write_bytes(b" " * (2 * 1024 * 1024) + path.read_bytes())
    found = reasons(proj)
    assert [r.rule for r in found] == [APPROVAL_INVALID] and "byte limit" in found[0].detail


def test_an_approval_with_a_duplicate_key_is_refused(proj):
    path = approve(proj)
    text = path.read_text().rstrip().removesuffix("}")
    path.write_text(text + ', "source_seal": "sha256:' + "f" * 64 + '"}')
    found = reasons(proj)
    assert [r.rule for r in found] == [APPROVAL_INVALID] and "duplicate" in found[0].detail


def test_an_approvals_folder_that_is_a_symlink_is_refused(proj, tmp_path):
    approve(proj)
    outside = tmp_path / "outside-approvals"
    shutil.move(proj / "approvals", outside)
    (proj / "approvals").symlink_to(outside)
    found = reasons(proj)  # the link is also an untracked path of the checkout
    assert [r.rule for r in found] == [APPROVAL_INVALID, PROVENANCE_DIRTY]
    assert "symlink" in found[0].detail


def test_another_campaigns_approval_renamed_is_refused(proj):
    """Same seal bytes can't be had, but the document must name this campaign anyway:
    an edited file name alone never moves an approval between campaigns."""
    path = approve(proj)
    doc = json.loads(path.read_text())
    doc["campaign"]["name"] = "other"
    path.write_text(json.dumps(doc))
    found = reasons(proj)
    assert [r.rule for r in found] == [APPROVAL_INVALID] and "campaign other" in found[0].detail


def test_a_gate_record_outside_the_project_or_at_root_is_refused_not_a_traceback(proj):
    path = approve(proj)
    doc = json.loads(path.read_text())
    for record in ("/", "../../../../../../", "/proc/self"):
        doc["gates"]["record"] = record
        path.write_text(json.dumps(doc))
        assert rules(proj) and all(r.startswith("APPROVAL-") for r in rules(proj))


def _signed(proj: Path, tmp_path: Path, allowed_line: str | None = None) -> Path:
    key, allowed = make_keys(tmp_path, "rev", proj)  # sealed: inside the checkout
    if allowed_line is not None:
        kind_blob = allowed.read_text().split(" ", 2)[2]
        allowed.write_text(allowed_line + " " + kind_blob)
    campaign(proj).write_text(campaign(proj).read_text() + f"allowed_signers: {allowed}\n")
    commit_all(proj)
    return approve(proj, key=key)


def test_a_principal_trusted_for_another_namespace_is_refused(proj, tmp_path):
    _signed(proj, tmp_path, 'rev@example namespaces="harness-bundle@v1"')
    assert rules(proj) == [APPROVAL_SIGNATURE]


def test_a_signature_of_other_bytes_is_refused(proj, tmp_path):
    path = _signed(proj, tmp_path)
    assert rules(proj) == []
    sig = path.with_name(path.name + ".sig")
    doc = json.loads(path.read_text())
    doc["approved_at"] = "2026-01-01T00:00:00Z"
    path.write_text(json.dumps(doc))  # the .sig stays the one for the old bytes
    assert sig.exists() and rules(proj) == [APPROVAL_SIGNATURE]


def test_ssh_keygen_missing_is_an_environment_fault_not_a_bad_approval(proj, tmp_path,
                                                                         monkeypatch):
    _signed(proj, tmp_path)
    which = shutil.which  # git stays: only OpenSSH is missing
    monkeypatch.setattr("harness.probe.sshsig.shutil.which",
                        lambda name: None if name == "ssh-keygen" else which(name))
    found = reasons(proj)
    assert [r.rule for r in found] == [ENV_ERROR] and "ssh-keygen" in found[0].detail


def test_a_gate_cannot_make_the_harness_write_its_junit_through_a_planted_symlink(tmp_path):
    scratch, out_dir, victim = tmp_path / "scratch", tmp_path / "rec" / "unit", tmp_path / "v"
    scratch.mkdir()
    out_dir.mkdir(parents=True)
    victim.write_text("precious\n")
    (scratch / "junit.xml").write_text("<testsuite><testcase name='a'/></testsuite>")
    (out_dir / "junit.xml").symlink_to(victim)  # what a hostile gate plants in the record
    gate = Gate(name="unit", run=["true"], timeout=10, expect={"junit": "junit.xml"})
    data, problem = gates_run._junit(gate, scratch, out_dir / "junit.xml")
    assert victim.read_text() == "precious\n"
    assert data is None and "a gate may not write there" in problem


def test_a_gate_junit_that_is_a_fifo_or_symlink_is_named_not_read(tmp_path):
    scratch, out_dir = tmp_path / "scratch", tmp_path / "rec"
    scratch.mkdir()
    out_dir.mkdir()
    gate = Gate(name="unit", run=["true"], timeout=10, expect={"junit": "junit.xml"})
    os.mkfifo(scratch / "junit.xml")
    assert gates_run._junit(gate, scratch, out_dir / "junit.xml")[0] is None
    (scratch / "junit.xml").unlink()
    (scratch / "junit.xml").symlink_to("/etc/passwd")
    data, problem = gates_run._junit(gate, scratch, out_dir / "junit.xml")
    assert data is None and "regular file" in problem


@pytest.mark.parametrize("planted", ["fifo", "link"])
def test_a_gate_that_swaps_its_stdout_log_is_neither_waited_on_nor_followed(tmp_path,
                                                                            planted):
    """The gate finds its own record folder and replaces its stdout log, once the harness has
    made it, with a FIFO (reading it would wait forever) or a link to a file of the host."""
    scratch, out_dir, secret = tmp_path / "scratch", tmp_path / "rec", tmp_path / "secret"
    scratch.mkdir()
    out_dir.mkdir()
    secret.write_text("SCORE 100 from a file the gate does not own\n")
    log = out_dir / "stdout.log"
    plant = f'mkfifo "{log}"' if planted == "fifo" else f'ln -s "{secret}" "{log}"'
    swap = f'while [ ! -e "{log}" ]; do sleep 0.01; done; echo real; rm "{log}"; {plant}'
    gate = Gate(name="unit", run=["sh", "-c", swap], timeout=30)
    done: list = []
    worker = threading.Thread(target=lambda: done.append(
        gates_run._execute(gate, tmp_path, scratch, out_dir)), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the harness waited on the FIFO the gate planted"
    assert done[0].exit_code == 0 and done[0].stdout == ""


# ---- the bundle chain --------------------------------------------------------------------------

def _run_facts(root: Path, approval: Path, name: str = "camp"):
    import hashlib

    from harness.readers.bundle.facts import RunFacts

    digest = "sha256:" + hashlib.sha256(approval.read_bytes()).hexdigest()
    return RunFacts(folder=f"data/{root.name}", record={
        "campaign": {"name": name, "file": str(campaign(root, name))},
        "approval": {"file": f"approvals/{approval.name}", "digest": digest},
        "seal": json.loads(approval.read_text())["source_seal"]})


def test_a_bundle_approval_naming_a_traversal_record_is_refused_precisely(tmp_path):
    """A crafted bundle whose approval names gate record '..' (a record sealed right at
    metadata/gates): verify names the uncarriable name instead of checking another folder."""
    import hashlib

    from harness.readers.bundle import chain

    seal = "sha256:" + "a" * 64
    root = tmp_path / "bag"
    record = gate_record(root / "metadata" / "gates", "camp", seal)
    from harness.judge.gaterecord.gatesjson import digest as record_digest
    doc = {"schema": "harness.approval/v1", "campaign": {"name": "camp", "file": "c.yaml"},
           "source_seal": seal, "images": {}, "models": {},
           "git": {"commit": "c" * 40, "dirty": False},
           "gates": {"record": "..", "digest": record_digest(record)},
           "reviewer": "r", "approved_at": "2026-11-30T00:00:00Z"}
    data = json.dumps(doc).encode()
    name = "camp-aaaaaaaaaaaa.json"
    (root / "metadata" / "approvals").mkdir(parents=True)
    (root / "metadata" / "approvals" / name).write_bytes(data)
    tag = f"metadata/approvals/{name}"
    digest = hashlib.sha256(data).hexdigest()
    from harness.readers.bundle.facts import RunFacts
    from harness.readers.bundle.trust import Policy
    run = RunFacts(folder="data/r", record={
        "campaign": {"name": "camp"}, "seal": seal,
        "approval": {"file": f"approvals/{name}", "digest": "sha256:" + digest}})
    found, _ = chain.judge(root, [run], {tag: digest}, Policy())
    assert [p.kind for p in found] == ["gates"]
    assert "no bundle carries" in str(found[0])


def test_two_gate_records_of_one_folder_name_are_never_merged_in_a_bundle(tmp_path,
                                                                         monkeypatch):
    from harness.readers.bundle import chain

    one, two = tmp_path / "one", tmp_path / "two"
    approved = []
    for root, extra in ((one, ""), (two, "description: the other one\n")):
        harness_of(monkeypatch, root)
        _project(root, extra=extra)
        commit_all(root)
        approved.append(approve(root))
    runs = [_run_facts(one, approved[0]), _run_facts(two, approved[1])]
    dirs = {"data/one": one / "runs", "data/two": two / "runs"}  # each run's own runs dir
    _tags, problems = chain.collect(runs, dirs)
    assert len(problems) == 1 and "same folder name camp-g" in str(problems[0])
    assert chain.collect(runs[:1], dirs)[1] == []


def test_a_gates_json_rewritten_before_the_seal_leaves_the_record_unsealed(tmp_path):
    """A gate's leftover process rewriting gates.json (passed: true) between the harness
    writing it and hashing it: the record is refused and never sealed."""
    from harness.base.atomic import write_json
    from harness.base.catalogue import GATES_TAMPERED
    from harness.base.errors import Refused

    folder = tmp_path / "rec"
    (folder / "unit").mkdir(parents=True)
    for log in ("stdout.log", "stderr.log"):
        (folder / "unit" / log).write_text("")
    gate = Gate(name="unit", run=["true"], timeout=10)
    doc = {"passed": False, "gates": []}
    write_json(folder / "gates.json", doc)
    gates_run._untouched(folder, [gate], doc)  # as written: fine
    write_json(folder / "gates.json", {**doc, "passed": True})
    (folder / "SHA256SUMS").write_text("")
    with pytest.raises(Refused) as e:
        gates_run._untouched(folder, [gate], doc)
    assert e.value.rule == GATES_TAMPERED and "gates.json was rewritten" in e.value.message
    assert not (folder / "SHA256SUMS").exists()


@pytest.mark.parametrize("record", ["x" * 100_000, "runs/a\x00b"])
def test_a_gate_record_path_too_long_or_with_a_nul_is_a_refusal_not_a_traceback(proj, record):
    from harness.base.catalogue import APPROVAL_GATES_MISSING

    path = approve(proj)
    doc = json.loads(path.read_text())
    doc["gates"]["record"] = record
    path.write_text(json.dumps(doc))
    found = reasons(proj)
    assert [r.rule for r in found] == [APPROVAL_GATES_MISSING]
    assert len(found[0].detail) < 1000


def test_approve_refuses_an_approvals_folder_that_is_a_symlink(proj, tmp_path):
    from harness.base.errors import InvalidInput

    outside = tmp_path / "outside"
    outside.mkdir()
    (proj / "approvals").symlink_to(outside)
    commit_all(proj)  # a committed symlink: the tree is clean
    with pytest.raises(InvalidInput, match="symlink"):
        approve(proj)
    assert list(outside.iterdir()) == []

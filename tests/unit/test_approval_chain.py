"""The approval chain by construction, over real git projects (no Docker): a gate record's
verdict is complete before it is sealed, an approval rests on gates run from the commit it
approves, "clean at commit X" means every sealed byte is in X, and what a run executes
(what its controls mount included) is what was approved."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.base.catalogue import (
    APPROVAL_DIRTY_TREE,
    APPROVAL_GATES_DIRTY,
    APPROVAL_GATES_FAILED,
    APPROVAL_GATES_OTHER_COMMIT,
    APPROVAL_OTHER_SEAL,
    APPROVAL_UNSEALED_MOUNT,
    GATES_SEAL_CHANGED,
    PROVENANCE_DIRTY,
)
from harness.base.errors import InvalidInput, Refused
from harness.config.loader import require_campaign
from harness.judge.approval import basis as approval_gates
from harness.judge.approval.check import what_runs
from harness.judge.approval.document import Pins, build, file_name
from harness.judge.gaterecord import gatesjson as gate_doc
from harness.measure.provenance import Found, Tracked, blob_id, clean_at, file_problems, parse_tree
from harness.measure.seal import source_files, source_seal
from harness.probe.approval import runcheck, write
from harness.probe.gaterun import run_gates
from harness.readers.bundle import chain
from harness.readers.bundle.facts import RunFacts
from harness.readers.bundle.trust import Policy
from tests.approval_helpers import commit_all, gate_record, harness_of, head, seal_of

IMG = "sha256:" + "1" * 64
WORKLOAD = "import sys\nprint('workload v1')\n"


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def make_project(root: Path, monkeypatch, *, gates: str = "", mounts: str = "",
                 extra: str = "") -> Path:
    """A git project holding the harness (as the real checkout does), one control whose
    workload script arrives by a read-only mount, and a campaign requiring approval."""
    harness_of(monkeypatch, root)
    _write(root, "images.lock", f"images:\n  rehearsal:\n    id: {IMG}\n")
    _write(root, "workload/run.py", WORKLOAD)
    _write(root, "controls/ctl.yaml",
           "name: ctl\nimage: rehearsal\ndevice: cpu\ncommand: [python3, /w/run.py]\n"
           "mounts:\n  - source: ../workload\n    target: /w\n" + mounts)
    _write(root, "campaigns/camp.yaml",
           f"name: camp\nrow: T\ncontrols: [ctl]\nrequire_approval: true\n{gates}{extra}")
    with (root / ".gitignore").open("a") as f:
        f.write("runs/\n")
    commit_all(root)
    return root / "campaigns" / "camp.yaml"


@pytest.fixture
def proj(tmp_path, monkeypatch) -> Path:
    make_project(tmp_path / "proj", monkeypatch)
    return tmp_path / "proj"


def camp(root: Path) -> Path:
    return root / "campaigns" / "camp.yaml"


def run_rules(root: Path) -> list[str]:
    loaded = require_campaign(camp(root))
    reasons = runcheck.for_run(loaded, seal_of(camp(root)), runs_dir=root / "runs")[1]
    return [r.rule for r in reasons]


def approve_with(root: Path, record: Path) -> Path:
    return write.approve(require_campaign(camp(root)), record, "rev@example", None)[0]


# ---- pure: git's blob names and the HEAD tree ------------------------------------------

def test_blob_id_is_what_git_hash_object_prints(tmp_path):
    for data in (b"", b"x\n", bytes(range(256)) * 40):
        path = tmp_path / "f"
        path.write_bytes(data)
        out = subprocess.run(["git", "hash-object", str(path)], capture_output=True,
                             text=True, check=True).stdout.strip()
        assert blob_id(data) == out


@pytest.mark.parametrize("listing", [b"100644 blob abc\tx\0", b"100644 blob " + b"a" * 40,
                                     b"garbage\0", b"100644 blob " + b"a" * 40 + b"\t\0"])
def test_a_tree_listing_that_is_not_one_is_refused(listing):
    with pytest.raises(ValueError):
        parse_tree(listing)


TREE = {"a.py": Tracked("100644", blob_id(b"a")), "l": Tracked("120000", blob_id(b"a.py")),
        "sub": Tracked("160000", "b" * 40)}


@pytest.mark.parametrize("found, why", [
    (Found("input/a.py", "a.py", data=b"a"), None),
    (Found("input/a.py", "a.py", data=b"a2"), "differs from HEAD"),
    (Found("input-abs/etc/x", None), "outside the checkout"),
    (Found("input/new.py", "new.py", data=b"n"), "not tracked in HEAD"),
    (Found("input/l", "l", is_link=True), "a symlink"),
    (Found("input/sub", "sub", data=b""), "not a plain file in HEAD"),
    (Found("input/a.py", "a.py", why="Permission denied"), "unreadable"),
])
def test_each_sealed_file_must_be_the_same_bytes_in_head(found, why):
    problems = file_problems(TREE, [found])
    assert (problems == []) if why is None else (len(problems) == 1 and why in problems[0])


# ---- class 3: "clean at commit X" means every sealed byte is in X ----------------------

def _dirty_by(root: Path, how: str, tmp: Path) -> None:
    if how == "ignored controls":  # the controls folder git-ignored: git status says clean
        subprocess.run(["git", "-C", str(root), "rm", "-rq", "--cached", "controls"], check=True)
        with (root / ".gitignore").open("a") as f:
            f.write("controls/\n")
        commit_all(root)
    elif how == "lock outside":  # images_lock: outside the checkout
        _write(tmp, "elsewhere/images.lock", f"images:\n  rehearsal:\n    id: {IMG}\n")
        text = camp(root).read_text() + f"images_lock: {tmp / 'elsewhere' / 'images.lock'}\n"
        camp(root).write_text(text)
        commit_all(root)
    elif how == "ignored mount file":  # a file of the workload mount, git-ignored
        with (root / ".gitignore").open("a") as f:
            f.write("workload/extra.py\n")
        _write(root, "workload/extra.py", "print('not in any commit')\n")
        commit_all(root)
    elif how == "harness edited":
        path = root / "harness" / "judge" / "verdict.py"
        path.write_text(path.read_text() + "\n# edited\n")
    elif how == "untracked note":
        _write(root, "notes.txt", "uncommitted\n")
    elif how == "symlinked control":  # HEAD holds the link, the seal its target's bytes
        target = root / "controls" / "ctl.yaml"
        _write(root, "real/ctl.yaml", target.read_text())
        target.unlink()
        target.symlink_to(root / "real" / "ctl.yaml")
        commit_all(root)


@pytest.mark.parametrize("how", ["ignored controls", "lock outside", "ignored mount file",
                                 "harness edited", "untracked note", "symlinked control"])
def test_approve_refuses_unless_every_sealed_byte_is_in_head(proj, tmp_path, how):
    _dirty_by(proj, how, tmp_path)
    record = gate_record(proj / "runs" / "gates" / "g", "camp", seal_of(camp(proj)),
                         commit=head(proj))
    with pytest.raises(Refused) as e:
        approve_with(proj, record)
    assert e.value.rule == APPROVAL_DIRTY_TREE
    assert not os.path.exists(proj / "approvals")


def test_a_clean_checkout_approves_and_approvals_do_not_dirty_it(proj):
    record = gate_record(proj / "runs" / "gates" / "g", "camp", seal_of(camp(proj)),
                         commit=head(proj))
    path = approve_with(proj, record)
    assert json.loads(path.read_text())["git"] == {"commit": head(proj), "dirty": False}
    assert run_rules(proj) == []  # the new, uncommitted approval is not a change


# ---- class 1: a gate record says passed only when `harness gates` passed ----------------

def test_a_seal_changed_while_the_gates_ran_is_sealed_as_failed(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    gates = ("gates:\n  - name: unit\n    run: [sh, -c, 'echo \"# x\" >> campaigns/camp.yaml']\n"
             "    timeout: 30\n")
    make_project(root, monkeypatch, gates=gates)
    good = camp(root).read_bytes()
    folder, doc, code = run_gates(require_campaign(camp(root)), root / "runs")
    assert code == 1 and doc["passed"] is False
    assert [r["rule"] for r in doc["refusals"]] == [GATES_SEAL_CHANGED]
    assert gate_doc.load(folder)["passed"] is False  # sealed so: the verdict came first
    camp(root).write_bytes(good)  # the change reverted: the seal is the gated one again
    assert seal_of(camp(root)) == doc["source_seal"]
    with pytest.raises(Refused) as e:
        approve_with(root, folder)
    assert e.value.rule == APPROVAL_GATES_FAILED and GATES_SEAL_CHANGED in e.value.message


# ---- class 2: an approval rests on gates run from the commit it approves ----------------

def test_gates_run_with_a_stubbed_test_cannot_carry_the_clean_commit(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    gates = "gates:\n  - name: unit\n    run: [sh, tests/runcheck.sh]\n    timeout: 30\n"
    _write(root, "tests/runcheck.sh", "exit 1\n")  # the real suite fails
    make_project(root, monkeypatch, gates=gates)
    (root / "tests" / "runcheck.sh").write_text("exit 0\n")  # stubbed, not committed
    folder, doc, code = run_gates(require_campaign(camp(root)), root / "runs")
    assert code == 0 and doc["passed"] is True and doc["git"]["clean"] is False
    assert any("tests/runcheck.sh" in p for p in doc["git"]["problems"])
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "tests/runcheck.sh"],
                   check=True)  # the stub reverted: the tree is clean at the commit again
    with pytest.raises(Refused) as e:
        approve_with(root, folder)
    assert e.value.rule == APPROVAL_GATES_DIRTY


def test_gates_of_an_untracked_stub_and_of_a_clean_commit(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    gates = "gates:\n  - name: unit\n    run: [sh, -c, 'test -f ok || exit 0']\n    timeout: 30\n"
    make_project(root, monkeypatch, gates=gates)
    folder, doc, code = run_gates(require_campaign(camp(root)), root / "runs")
    assert code == 0 and doc["git"] == {"commit": head(root), "clean": True, "problems": [],
                                        "problems_total": 0}
    _write(root, "stub.py", "x")  # untracked: a second record is not clean
    _, dirty, _ = run_gates(require_campaign(camp(root)), root / "runs")
    assert dirty["git"]["clean"] is False and "stub.py" in dirty["git"]["problems"][0]
    (root / "stub.py").unlink()
    assert approve_with(root, folder).is_file()


def test_gates_of_another_commit_cannot_carry_the_approval(proj):
    record = gate_record(proj / "runs" / "gates" / "g", "camp", seal_of(camp(proj)),
                         commit=head(proj))
    _write(proj, "README", "a later commit; the seal is the same\n")
    commit_all(proj)
    with pytest.raises(Refused) as e:
        approve_with(proj, record)
    assert e.value.rule == APPROVAL_GATES_OTHER_COMMIT


def test_a_v1_gate_record_cannot_carry_an_approval(proj):
    record = gate_record(proj / "runs" / "gates" / "g", "camp", seal_of(camp(proj)), v1=True)
    with pytest.raises(Refused) as e:
        approve_with(proj, record)
    assert e.value.rule == APPROVAL_GATES_DIRTY and "v1" in e.value.message


def _forged_approval(root: Path, record: Path, commit: str) -> Path:
    """An approval written by hand (not by `approve`) naming a dirty gate record."""
    seal = seal_of(camp(root))
    doc = build({"name": "camp", "file": "campaigns/camp.yaml"},
                Pins(seal, {"rehearsal": IMG}, {}), {"commit": commit, "dirty": False},
                {"record": str(record), "digest": gate_doc.digest(record),
                 "campaign": "camp", "source_seal": seal, "passed": True},
                "rev@example", "2026-12-01T00:00:00Z")
    path = root / "approvals" / file_name("camp", seal)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("clean, commit_of, rule", [
    (False, "head", APPROVAL_GATES_DIRTY), (True, "other", APPROVAL_GATES_OTHER_COMMIT)])
def test_the_run_time_check_and_bundle_verify_apply_the_same_rule(proj, clean, commit_of, rule):
    commit = head(proj) if commit_of == "head" else "d" * 40
    record = gate_record(proj / "runs" / "gates" / "g", "camp", seal_of(camp(proj)),
                         commit=commit, clean=clean)
    path = _forged_approval(proj, record, head(proj))
    assert run_rules(proj) == [rule]
    # bundle verify, over the same two documents as a bag carries them
    bag = proj / "bag"
    gate_record(bag / "metadata" / "gates" / "g", "camp", seal_of(camp(proj)), commit=commit,
                clean=clean)
    doc = json.loads(path.read_text())
    doc["gates"]["record"] = "runs/gates/g"
    doc["gates"]["digest"] = gate_doc.digest(bag / "metadata" / "gates" / "g")
    data = json.dumps(doc).encode()
    tag = f"metadata/approvals/{path.name}"
    (bag / "metadata" / "approvals").mkdir(parents=True)
    (bag / tag).write_bytes(data)
    import hashlib
    digest = hashlib.sha256(data).hexdigest()
    run = RunFacts(folder="data/r", record={
        "campaign": {"name": "camp"}, "seal": doc["source_seal"],
        "approval": {"file": f"approvals/{path.name}", "digest": "sha256:" + digest}})
    found, _ = chain.judge(bag, [run], {tag: digest}, Policy())
    assert [p.kind for p in found] == ["gates"] and rule in str(found[0])


# ---- class 4: what a run executes is what was approved ----------------------------------

def _approved(root: Path) -> None:
    record = gate_record(root / "runs" / "gates" / "g", "camp", seal_of(camp(root)),
                         commit=head(root))
    approve_with(root, record)


def test_the_mounted_workload_is_in_the_seal(proj):
    loaded = require_campaign(camp(proj))
    labels = set(source_files(proj, loaded.files()))
    assert "input/workload/run.py" in labels
    _approved(proj)
    (proj / "workload" / "run.py").write_text(WORKLOAD + "print('changed')\n")
    assert run_rules(proj) == [APPROVAL_OTHER_SEAL, PROVENANCE_DIRTY]
    commit_all(proj)  # committed: still not the approved bytes
    assert run_rules(proj) == [APPROVAL_OTHER_SEAL]


def test_bytecode_caches_in_a_mount_are_not_inputs(proj):
    before = seal_of(camp(proj))
    _write(proj, "workload/__pycache__/run.cpython-311.pyc", "cache")
    assert seal_of(camp(proj)) == before


@pytest.mark.parametrize("dirt", ["notes.txt", "tests/stub_test.py", "approvals"])
def test_a_dirty_tree_is_refused_under_an_approval_of_its_seal(proj, dirt):
    _approved(proj)
    assert run_rules(proj) == []
    if dirt == "approvals":  # changes under approvals/ never count
        _write(proj, "approvals/other-000000000000.json", "{}")
        assert run_rules(proj) == []
        return
    _write(proj, dirt, "x = 1\n")
    assert run_rules(proj) == [PROVENANCE_DIRTY]
    loaded = require_campaign(camp(proj))
    clean = clean_at(proj, source_files(proj, loaded.files()))
    assert dirt.split("/")[0] in what_runs(loaded, clean)[0][1]


def test_an_unsealed_mount_is_refused_under_require_approval(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    _write(root, "env/lib.py", "x = 1\n")
    make_project(root, monkeypatch,
                 mounts="  - source: ../env\n    target: /env\n    sealed: false\n")
    assert "input/env/lib.py" not in source_files(root, require_campaign(camp(root)).files())
    assert APPROVAL_UNSEALED_MOUNT in run_rules(root)


def test_a_sealed_mount_of_an_environment_is_bad_input(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    for i in range(5001):
        _write(root, f"workload/many/{i}.py", "")
    with pytest.raises(InvalidInput) as e:
        make_project(root, monkeypatch)
        require_campaign(camp(root))
    assert "sealed: false" in " ".join(e.value.faults)


def test_clean_at_outside_git_cannot_tell(tmp_path):
    _write(tmp_path, "a.txt", "a")
    clean = clean_at(tmp_path, {"input/a.txt": tmp_path / "a.txt"})
    assert clean.clean is False and "git cannot tell" in clean.problems[0]


def test_the_check_reads_the_seal_s_own_file_list(proj):
    loaded = require_campaign(camp(proj))
    files = source_files(proj, loaded.files())
    assert set(files) == set(source_seal(proj, loaded.files()).files)
    assert clean_at(proj, files).clean
    assert approval_gates.Wanted("camp", (), "s", None).commit is None


# ---- variants: what git status alone does not show ---------------------------------------

@pytest.mark.parametrize("hide", ["assume-unchanged", "skip-worktree", "info/exclude",
                                  "global excludes"])
def test_a_change_git_status_hides_is_still_not_clean(proj, tmp_path, hide, monkeypatch):
    """A stubbed test the index is told to ignore, or an untracked one hidden by the
    user's own excludes: git status says clean, the check does not."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(proj), *args], check=True, capture_output=True)

    _write(proj, "tests/runcheck.sh", "exit 1\n")
    commit_all(proj)
    if hide in ("assume-unchanged", "skip-worktree"):
        git("update-index", f"--{hide}", "tests/runcheck.sh")
        (proj / "tests" / "runcheck.sh").write_text("exit 0\n")
    elif hide == "info/exclude":
        with (proj / ".git" / "info" / "exclude").open("a") as f:
            f.write("tests/conftest.py\n")
        _write(proj, "tests/conftest.py", "# forces every outcome\n")
    else:
        excludes = tmp_path / "excludes"
        excludes.write_text("tests/conftest.py\n")
        monkeypatch.setenv("HOME", str(tmp_path))
        (tmp_path / ".gitconfig").write_text(f"[core]\n\texcludesFile = {excludes}\n")
        _write(proj, "tests/conftest.py", "# forces every outcome\n")
    status = subprocess.run(["git", "-C", str(proj), "status", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    assert status == ""  # what the old check trusted
    loaded = require_campaign(camp(proj))
    clean = clean_at(proj, source_files(proj, loaded.files()))
    assert clean.clean is False
    assert any(("tests/" in p) or ("info/exclude" in p) for p in clean.problems)


def test_a_change_made_and_reverted_between_two_gates_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    edit = "printf '# x\\n' >> campaigns/camp.yaml"
    undo = "sed -i '$d' campaigns/camp.yaml"
    gates = (f"gates:\n  - name: edit\n    run: [sh, -c, \"{edit}\"]\n    timeout: 30\n"
             f"  - name: undo\n    run: [sh, -c, \"{undo}\"]\n    timeout: 30\n")
    make_project(root, monkeypatch, gates=gates)
    before = seal_of(camp(root))
    _, doc, code = run_gates(require_campaign(camp(root)), root / "runs")
    assert seal_of(camp(root)) == before  # reverted by the second gate
    assert code == 1 and doc["passed"] is False
    assert "after gate edit" in doc["refusals"][0]["detail"]


def test_a_mount_that_now_leads_outside_the_roots_is_never_read(tmp_path):
    """A workload may swap a mounted folder for a link out of the roots, or to a system
    path: the seal never walks (nor hashes) what lies there; the launch refuses the mount
    itself. FIFOs and sockets inside a mount are never opened."""
    from harness.config.mountable import mountable
    from harness.config.mountinputs import mounted_files

    root, outside = tmp_path / "root", tmp_path / "outside"
    _write(root, "w/a.py", "a")
    os.mkfifo(root / "w" / "pipe")
    _write(outside, "secret.txt", "host-only")
    roots = [root.resolve(), Path("/run")]

    def allowed(real: Path) -> bool:
        return mountable(real, roots)

    assert mounted_files(root / "w", allowed) == [(root / "w" / "a.py").resolve()]
    (root / "link").symlink_to(outside)
    (root / "sys").symlink_to("/run")
    assert mounted_files(root / "link", allowed) == []
    assert mounted_files(root / "sys", allowed) == []  # a root, but a system path

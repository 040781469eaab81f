"""Paired controls for the approval chain with the real engine, on a git project: a run of
a `require_approval` campaign is refused before the lock without an approval of its seal
and accepted with one; each other way to fail names its own rule."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile

from harness.measure.runfolder.manifest import write_manifest
from harness.readers.bundle.safe_extract import unpack as unpack_archive
from tests.approval_helpers import commit_all, gate_record, head, make_keys, seal_of, with_harness
from tests.conftest import REPO, containers_with_label
from tests.unit.bundle_helpers import make_keys as signer

HELLO = """\
command: [python3, -c, "print('hello')"]
timeout: 1m
"""


def setup(project, extra: str = ""):
    project.control("hello", HELLO)
    camp = project.campaign("camp", ["hello"], "require_approval: true\n" + extra)
    (project.root / ".gitignore").write_text("runs/\nlocks/\n")
    with_harness(project.root)  # one checkout: the harness and the campaigns
    commit_all(project.root)
    return camp


EARLY = re.compile(r"\[([A-Z0-9-]+)\] |; ([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+): ")


def early_rules(stderr: str) -> list[str]:
    """The rules of a refusal printed before any folder exists: `[FIRST] detail; OTHER:
    detail; nothing was run or written. Next: ...`."""
    head = stderr.partition("; nothing was run or written")[0]
    return [a or b for a, b in EARLY.findall(head)]


def run(project, camp) -> tuple[int, dict | None, str]:
    """(exit code, the new run's record, stderr). A seal no approval covers is refused
    before the run folder is made: then the record is None, nothing new exists, and the
    rules and the next step are on stderr."""
    before = set(project.run_dirs())
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    new = sorted(set(project.run_dirs()) - before)
    if not new:
        assert r.returncode == 1 and "nothing was run or written. Next: " in r.stderr, r.stderr
        return r.returncode, None, r.stderr
    [new] = new
    assert project.harness("verify", str(new)).returncode == 0
    return r.returncode, project.record(new), r.stderr


def rules(rec: dict | None, stderr: str) -> list[str]:
    """The rules that refused: the run record's, else (refused before a folder) stderr's."""
    return rec["rules"] if rec is not None else early_rules(stderr)


def approve(project, camp, *extra: str, name: str = "g1", passed: bool = True):
    gates = gate_record(project.runs / "gates" / name, "camp", seal_of(camp, project.root),
                        passed=passed, commit=head(project.root))
    return project.harness("approve", str(camp), "--gates", str(gates),
                           "--reviewer", "rev@example", *extra)


def test_remove_the_approval_refuses_restore_accepts(project):
    camp = setup(project)
    code, rec, err = run(project, camp)
    assert code == 1 and rec is None and early_rules(err) == ["SEAL-NOT-APPROVED"]
    seal = seal_of(camp, project.root)
    assert "`harness gates " in err and "`harness approve " in err, err
    assert f"for seal {seal}" in err, err  # the next step names the seal to approve
    r = approve(project, camp)
    assert r.returncode == 0, r.stderr
    [path] = (project.root / "approvals").iterdir()
    doc = json.loads(path.read_text())
    assert doc["source_seal"] == seal_of(camp, project.root) and doc["images"] == {"rehearsal":
                                                                     project.image_id}
    assert doc["git"]["dirty"] is False and doc["gates"]["passed"] is True
    code, rec, err = run(project, camp)
    assert code == 0, err
    assert rec["status"] == "accepted" and rec["approval"]["file"] == f"approvals/{path.name}"
    assert rec["approval"]["seal"] == rec["seal"] == doc["source_seal"]
    assert rec["approval"]["commit"] == doc["git"]["commit"]
    kept = path.read_bytes()
    accepted = rec["run_id"]
    path.unlink()
    code, rec, err = run(project, camp)
    assert code == 1 and rec is None and early_rules(err) == ["SEAL-NOT-APPROVED"]
    before = set(project.run_dirs())
    r = project.harness("rerun", str(project.runs / accepted), "--reason", "no approval")
    assert r.returncode == 1 and early_rules(r.stderr) == ["SEAL-NOT-APPROVED"], r.stderr
    assert set(project.run_dirs()) == before  # nothing made for a rerun either
    path.write_bytes(kept)
    code, rec, _ = run(project, camp)
    assert code == 0 and rec["status"] == "accepted"
    # committing the approval makes a new commit: the run matches on the sealed bytes, and
    # records its own commit; show says the reviewed one differs
    reviewed = doc["git"]["commit"]
    assert commit_all(project.root, "approve") != reviewed
    code, rec, _ = run(project, camp)
    assert code == 0 and rec["approval"]["commit"] == reviewed != rec["provenance"]["commit"]
    shown = project.harness("show", str(project.runs / rec["run_id"]),
                            env={**os.environ, "COLUMNS": "400"})
    assert "not the commit this run ran at" in shown.stdout, shown.stdout
    night = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert night.returncode == 0, night.stderr  # the night driver runs under it too
    assert containers_with_label(f"org.harness.lock={project.lock}") == []


def test_each_other_failure_names_its_own_rule(project, tmp_path):
    key, allowed = make_keys(tmp_path, "rev")
    camp = setup(project, f"allowed_signers: {allowed}\n")
    (project.root / "notes.txt").write_text("uncommitted\n")
    r = approve(project, camp, "--sign-key", str(key), name="dirty")
    assert r.returncode == 1 and "[APPROVAL-DIRTY-TREE]" in r.stderr
    (project.root / "notes.txt").unlink()
    r = approve(project, camp, "--sign-key", str(key), name="failed", passed=False)
    assert r.returncode == 1 and "[APPROVAL-GATES-FAILED]" in r.stderr
    assert not (project.root / "approvals").exists()
    r = approve(project, camp, "--sign-key", str(key))
    assert r.returncode == 0, r.stderr
    [path] = sorted((project.root / "approvals").glob("*.json"))
    sig = path.with_name(path.name + ".sig")
    code, rec, err = run(project, camp)
    assert code == 0, err
    # a tampered signature
    good = sig.read_bytes()
    sig.write_bytes(good.replace(b"\n", b"\n\n", 2))
    code, rec, err = run(project, camp)
    assert code == 1 and rules(rec, err) == ["APPROVAL-SIGNATURE"]
    sig.write_bytes(good)
    # the gate record failed after the approval (replaced by a failed one of the same name)
    gates = project.runs / "gates" / "g1"
    gates.chmod(0o755)
    shutil.rmtree(gates)
    gate_record(gates, "camp", seal_of(camp, project.root), passed=False,
                commit=head(project.root))
    code, rec, err = run(project, camp)
    assert code == 1 and "APPROVAL-GATES-FAILED" in rules(rec, err)
    # an approval for another seal: the campaign changed since
    camp.write_text(camp.read_text() + "description: changed\n")
    code, rec, err = run(project, camp)  # uncommitted, too: what runs is not what was approved
    assert code == 1 and rules(rec, err) == ["APPROVAL-OTHER-SEAL", "PROVENANCE-DIRTY"]
    assert rec is None  # refused before any folder, so before the GPU lock
    commit_all(project.root)
    code, rec, err = run(project, camp)
    assert code == 1 and rules(rec, err) == ["APPROVAL-OTHER-SEAL"]
    # a changed image pin
    camp.write_text(camp.read_text().replace("description: changed\n", ""))
    lock = project.root / "images.lock"
    lock.write_text(lock.read_text().replace(project.image_id, "sha256:" + "7" * 64))
    code, rec, err = run(project, camp)
    assert "APPROVAL-IMAGE-CHANGED" in rules(rec, err) and code == 1


def _retag(root) -> None:
    """A forger's fix-up: a tag manifest over every tag file as it now is (unsigned)."""
    from harness.measure.runfolder.manifest import render as format_sums

    (root / "tagmanifest-sha256.txt.sig").unlink(missing_ok=True)
    tags = {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and p.parts[len(root.parts)] != "data"
            and p.name != "tagmanifest-sha256.txt"}
    (root / "tagmanifest-sha256.txt").write_text(format_sums(tags))


def test_a_bundle_carries_and_checks_the_chain(project, tmp_path):
    camp = setup(project)
    assert approve(project, camp).returncode == 0
    code, rec, err = run(project, camp)
    assert code == 0, err
    name = rec["approval"]["file"].split("/")[1]
    out = tmp_path / "evidence.tar.gz"
    r = project.harness("bundle", "export", str(project.runs / rec["run_id"]), "-o", str(out))
    assert r.returncode == 0, r.stderr
    with tarfile.open(out) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {f"metadata/approvals/{name}", "metadata/gates/g1/gates.json",
            "metadata/gates/g1/SHA256SUMS"} <= names
    r = project.harness("bundle", "verify", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    recipe = re.search(r"<!-- bundle-doc-test: coreutils -->\n```sh\n(.*?)```",
                       (REPO / "docs" / "bundles.md").read_text(), re.DOTALL).group(1)
    by_hand = subprocess.run(["bash", "-c", recipe], cwd=tmp_path, capture_output=True,
                             text=True)
    assert by_hand.returncode == 0 and "bundle verified" in by_hand.stdout, by_hand.stderr
    assert "check failed" not in by_hand.stderr, by_hand.stderr
    # a forger swaps in a failed gate record and fixes every manifest but the approval's digest
    root = unpack_archive(out, tmp_path / "forged").root
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    gates = root / "metadata/gates/g1"
    (gates / "SHA256SUMS").unlink()
    doc = json.loads((gates / "gates.json").read_text())
    doc["passed"] = doc["gates"][0]["passed"] = False
    (gates / "gates.json").write_text(json.dumps(doc))
    write_manifest(gates)
    _retag(root)
    r = project.harness("bundle", "verify", str(root))
    assert r.returncode == 1 and "FAIL gates" in r.stdout, r.stdout + r.stderr
    unpack = re.search(r"^mkdir review .*?\ncd review\ntar -xf \"\$BUNDLE\".*?$", recipe,
                       re.MULTILINE | re.DOTALL).group(0)
    forged = recipe.replace(unpack, "cd forged")
    assert forged != recipe
    by_hand = subprocess.run(["bash", "-c", forged], cwd=tmp_path, capture_output=True,
                             text=True)
    assert by_hand.returncode != 0 and "bundle verified" not in by_hand.stdout
    # the check that stopped it is the gate record's digest against the approval's
    assert "check failed: test " in by_hand.stderr and "$record/SHA256SUMS" in by_hand.stderr
    assert "APPROVAL-GATES-FAILED" in r.stdout and "APPROVAL-GATES-NOT-INTACT" in r.stdout
    # and export refuses a run whose gate record changed on disk since it was approved
    source = project.runs / "gates" / "g1"
    source.chmod(0o755)
    (source / "gates.json").write_text((source / "gates.json").read_text() + " ")
    r = project.harness("bundle", "export", str(project.runs / rec["run_id"]), "-o",
                        str(tmp_path / "again.tar.gz"))
    assert r.returncode == 1 and "gates" in r.stdout + r.stderr


def test_bundle_verify_checks_the_approvals_signature_against_the_allowed_signers(project,
                                                                                  tmp_path):
    """The operator signs bundles, the reviewer approvals; each key is trusted for its own
    namespace only. An operator who swaps in an approval signature of their own (and
    re-signs the bundle, as they may) is caught: the approval's .sig is checked too."""
    rev_key, rev_allowed = make_keys(tmp_path, "rev")
    op_key, op_line = signer(tmp_path, "op")  # trusted for bundles (harness-evidence) only
    allowed = tmp_path / "allowed"
    allowed.write_text(rev_allowed.read_text() + op_line)
    camp = setup(project, f"allowed_signers: {rev_allowed}\n")
    assert approve(project, camp, "--sign-key", str(rev_key)).returncode == 0
    code, rec, err = run(project, camp)
    assert code == 0, err
    out = tmp_path / "signed.tar.gz"
    r = project.harness("bundle", "export", str(project.runs / rec["run_id"]), "-o", str(out),
                        "--sign-key", str(op_key))
    assert r.returncode == 0, r.stderr
    r = project.harness("bundle", "verify", str(out), "--allowed-signers", str(allowed))
    assert r.returncode == 0, r.stdout + r.stderr
    # the forger: an approval signature by the operator's own key, then a re-signed bundle
    root = unpack_archive(out, tmp_path / "forged").root
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    [approval] = (root / "metadata" / "approvals").glob("*.json")
    sig = approval.with_name(approval.name + ".sig")
    sig.unlink()
    subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(op_key), "-n",
                    "harness-approval@v1", str(approval)], check=True, capture_output=True)
    _retag(root)
    tagmanifest = root / "tagmanifest-sha256.txt"
    subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(op_key), "-n",
                    "harness-evidence", str(tagmanifest)], check=True, capture_output=True)
    r = project.harness("bundle", "verify", str(root), "--allowed-signers", str(allowed))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "approval-signature" in r.stdout and approval.name in r.stdout
    assert "bad-signature" not in r.stdout  # the bundle's own signature is the operator's, good


def test_a_dirty_checkout_never_runs_under_the_approval_of_its_seal(project):
    """The seal is the approved one, but the checkout holds an uncommitted file, or the
    mounted workload is git-ignored: refused before any folder (so before the GPU lock),
    nothing launched, the next step said."""
    camp = setup(project)
    assert approve(project, camp).returncode == 0
    (project.root / "notes.txt").write_text("an uncommitted change\n")
    code, rec, err = run(project, camp)
    assert code == 1 and rec is None and early_rules(err) == ["PROVENANCE-DIRTY"], err
    assert "notes.txt" in err and "Next: commit (or remove) what is not clean" in err, err
    (project.root / "notes.txt").unlink()
    code, rec, err = run(project, camp)
    assert code == 0 and rec["status"] == "accepted", err
    # the run's own new approval, as `harness approve` wrote it, is no change: clean
    [approval] = (project.root / "approvals").iterdir()
    assert rec["provenance"]["dirty"] is False and rec["provenance"]["changed"] == []
    assert rec["provenance"]["own_approval"] == f"approvals/{approval.name}"
    shown = project.harness("show", str(project.runs / rec["run_id"]),
                            env={**os.environ, "COLUMNS": "400"})
    assert "(clean; its own approval approvals/" in shown.stdout, shown.stdout
    # a hand-edited approval (same document, not as approve wrote it) stays a change
    approval.write_text(json.dumps(json.loads(approval.read_text())))
    code, rec, err = run(project, camp)
    assert code == 0 and rec["provenance"]["dirty"] is True, err
    assert [p.split("/")[0] for p in rec["provenance"]["changed"]] == ["approvals"]
    assert "own_approval" not in rec["provenance"]

"""Approvals without Docker: the pure matching, the document, the seal's coverage, and the
run-time check (`probe.approval.runcheck.for_run`) over a real git project on disk, rule by rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.base.catalogue import (
    APPROVAL_DIRTY_TREE,
    APPROVAL_GATES_FAILED,
    APPROVAL_GATES_MISSING,
    APPROVAL_GATES_NOT_INTACT,
    APPROVAL_GATES_OTHER_SEAL,
    APPROVAL_IMAGE_CHANGED,
    APPROVAL_INVALID,
    APPROVAL_MODEL_CHANGED,
    APPROVAL_OTHER_SEAL,
    APPROVAL_SIGNATURE,
    PROVENANCE_DIRTY,
    SEAL_NOT_APPROVED,
)
from harness.base.errors import InvalidInput, Refused
from harness.config.loader import require_campaign
from harness.judge.approval.document import SCHEMA, Pins, build, file_name, match, parse
from harness.judge.approval.issue import dirty_reason
from harness.measure.provenance import CleanCheck
from harness.measure.seal import source_files, source_seal
from harness.probe.approval import runcheck, write
from tests.approval_helpers import commit_all, gate_record, harness_of, head, make_keys, seal_of

SEAL_A, SEAL_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
IMG = "sha256:" + "1" * 64
PINS = Pins(SEAL_A, {"rehearsal": IMG}, {"ctl": {"w.bin": "sha256:" + "2" * 64}})
CLEAN = {"commit": "c" * 40, "dirty": False, "changed": [], "changed_total": 0, "error": None}


def doc(pins: Pins = PINS, git: dict | None = None) -> dict:
    return json.loads(json.dumps(build({"name": "camp", "file": "campaigns/camp.yaml"}, pins,
                                       git or CLEAN, {"record": "g", "digest": SEAL_B},
                                       "rev@example", "2026-11-30T00:00:00Z")))


# ---- pure --------------------------------------------------------------------------------------

def test_an_approval_matches_exactly_its_pins():
    assert match(doc(), PINS) == []


def test_another_seal_with_the_same_pins_is_its_own_rule():
    assert [r for r, _ in match(doc(), Pins(SEAL_B, PINS.images, PINS.models))] == [
        APPROVAL_OTHER_SEAL]


def test_a_changed_image_pin_is_named_not_just_another_seal():
    found = match(doc(), Pins(SEAL_B, {"rehearsal": "sha256:" + "9" * 64}, PINS.models))
    assert [r for r, _ in found] == [APPROVAL_IMAGE_CHANGED]
    assert "image rehearsal" in found[0][1]


def test_a_changed_model_pin_is_named():
    found = match(doc(), Pins(SEAL_B, PINS.images, {"ctl": {"w.bin": "sha256:" + "3" * 64}}))
    assert [r for r, _ in found] == [APPROVAL_MODEL_CHANGED]


@pytest.mark.parametrize("git", [{"commit": "c" * 40, "dirty": True},
                                 {"commit": None, "dirty": False},
                                 {"commit": "c" * 40, "dirty": None}])
def test_an_approval_from_a_dirty_or_unknown_tree_never_matches(git):
    assert [r for r, _ in match(doc(git=git), PINS)] == [APPROVAL_DIRTY_TREE]


def test_the_file_is_named_by_campaign_and_seal():
    assert file_name("camp", SEAL_A) == "camp-aaaaaaaaaaaa.json"


@pytest.mark.parametrize("data", [
    b"{", b"[]", b'{"schema": "x"}', b"\xff",
    json.dumps({**doc(), "source_seal": "sha256:short"}).encode(),
    json.dumps({**doc(), "images": ["x"]}).encode(),
    json.dumps({**doc(), "gates": {}}).encode(),
    b'{"schema": "' + SCHEMA.encode() + b'", "schema": "' + SCHEMA.encode() + b'"}',
    json.dumps(doc()).replace('"approved_at"', '"n": NaN, "approved_at"').encode(),
])
def test_a_malformed_approval_is_refused_by_the_parser(data):
    with pytest.raises(ValueError):
        parse(data)


def test_parse_reads_back_what_build_writes():
    assert parse(json.dumps(doc()).encode()) == doc()


@pytest.mark.parametrize("clean, dirty", [
    (CleanCheck("c" * 40, True, (), 0), False),
    (CleanCheck("c" * 40, False, ("harness/x.py: differs from HEAD",), 1), True),
    (CleanCheck(None, False, ("git cannot tell: not a git work tree",), 1), True),
    (CleanCheck(None, True, (), 0), True),  # no commit to name
])
def test_only_a_clean_head_may_be_approved(clean, dirty):
    assert (dirty_reason(clean) is not None) is dirty


# ---- a project on disk ----------------------------------------------------------------------

@pytest.fixture
def proj(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "proj"
    harness_of(monkeypatch, root)
    for d in ("campaigns", "controls"):
        (root / d).mkdir(parents=True)
    (root / "images.lock").write_text(f"images:\n  rehearsal:\n    id: {IMG}\n")
    (root / "controls" / "ctl.yaml").write_text(
        "name: ctl\nimage: rehearsal\ndevice: cpu\ncommand: [\"true\"]\n")
    (root / "campaigns" / "camp.yaml").write_text(
        "name: camp\nrow: T\ncontrols: [ctl]\nrequire_approval: true\n")
    with (root / ".gitignore").open("a") as f:
        f.write("runs/\n")
    commit_all(root)
    return root


def campaign(root: Path) -> Path:
    return root / "campaigns" / "camp.yaml"


def approve(root: Path, *, passed: bool = True, key: Path | None = None,
            name: str = "g1") -> Path:
    gates = gate_record(root / "runs" / "gates" / name, "camp", seal_of(campaign(root)),
                        passed=passed, commit=head(root))
    loaded = require_campaign(campaign(root))
    path, _ = write.approve(loaded, gates, "rev@example", key)
    return path


def rules(root: Path) -> list[str]:
    loaded = require_campaign(campaign(root))
    _, reasons = runcheck.for_run(loaded, source_seal(root, loaded.files()).digest,
                               runs_dir=root / "runs")
    return [r.rule for r in reasons]


def test_approvals_are_outside_the_source_seal(proj):
    loaded = require_campaign(campaign(proj))
    before = source_seal(proj, loaded.files())
    approve(proj)
    assert source_seal(proj, loaded.files()) == before
    assert not any("approvals" in label for label in source_files(proj, loaded.files()))


def test_remove_the_approval_refuses_restore_accepts(proj):
    assert rules(proj) == [SEAL_NOT_APPROVED]
    path = approve(proj)
    loaded = require_campaign(campaign(proj))
    named, reasons = runcheck.for_run(loaded, source_seal(proj, loaded.files()).digest,
                                   runs_dir=proj / "runs")
    assert reasons == [] and named["file"] == f"approvals/{path.name}"
    assert named["commit"] == head(proj) and named["digest"].startswith("sha256:")
    kept = path.read_bytes()
    path.unlink()
    assert rules(proj) == [SEAL_NOT_APPROVED]
    path.write_bytes(kept)
    assert rules(proj) == []


def test_an_approval_of_another_seal_refuses(proj):
    approve(proj)
    (proj / "campaigns" / "camp.yaml").write_text(
        "name: camp\nrow: T\ncontrols: [ctl]\nrequire_approval: true\ndescription: v2\n")
    assert rules(proj) == [APPROVAL_OTHER_SEAL, PROVENANCE_DIRTY]  # uncommitted, too
    commit_all(proj)
    assert rules(proj) == [APPROVAL_OTHER_SEAL]


def test_a_changed_image_pin_refuses(proj):
    approve(proj)
    (proj / "images.lock").write_text(f"images:\n  rehearsal:\n    id: sha256:{'7' * 64}\n")
    commit_all(proj)
    assert rules(proj) == [APPROVAL_IMAGE_CHANGED]


def test_a_dirty_tree_cannot_approve(proj):
    (proj / "notes.txt").write_text("uncommitted\n")
    with pytest.raises(Refused) as e:
        approve(proj)
    assert e.value.rule == APPROVAL_DIRTY_TREE
    assert not (proj / "approvals").exists()


def test_a_failed_gate_record_cannot_approve(proj):
    with pytest.raises(Refused) as e:
        approve(proj, passed=False)
    assert e.value.rule == APPROVAL_GATES_FAILED


def test_a_gate_record_for_another_seal_cannot_approve(proj):
    gates = gate_record(proj / "runs" / "gates" / "old", "camp", SEAL_A, commit=head(proj))
    with pytest.raises(Refused) as e:
        write.approve(require_campaign(campaign(proj)), gates, "r", None)
    assert e.value.rule == APPROVAL_GATES_OTHER_SEAL


def test_an_approval_is_never_overwritten(proj):
    approve(proj)
    with pytest.raises(InvalidInput):
        approve(proj, name="g2")


def test_the_gate_record_must_stay_there_and_intact(proj):
    approve(proj)
    gates = proj / "runs" / "gates" / "g1"
    gates.chmod(0o755)
    (gates / "gates.json").write_text((gates / "gates.json").read_text() + " ")
    assert rules(proj) == [APPROVAL_GATES_NOT_INTACT]
    shutil.rmtree(gates)
    assert rules(proj) == [APPROVAL_GATES_MISSING]


def test_a_tampered_approval_refuses(proj):
    path = approve(proj)
    path.write_text("{not json")
    assert rules(proj) == [APPROVAL_INVALID]


def test_signatures_when_the_campaign_names_allowed_signers(proj, tmp_path):
    key, allowed = make_keys(tmp_path, "rev", proj)
    text = campaign(proj).read_text() + f"allowed_signers: {allowed}\n"
    campaign(proj).write_text(text)
    commit_all(proj)
    path = approve(proj, key=key)
    sig = path.with_name(path.name + ".sig")
    assert rules(proj) == []
    data = json.loads(path.read_text())
    data["reviewer"] = "mallory@example"  # the document no longer matches its signature
    good = path.read_bytes()
    path.write_text(json.dumps(data))
    assert rules(proj) == [APPROVAL_SIGNATURE]
    path.write_bytes(good)
    sig.unlink()
    assert rules(proj) == [APPROVAL_SIGNATURE]  # unsigned


def test_a_partial_gate_record_cannot_carry_an_approval(tmp_path):
    """A record made with `gates --only` passed only what ran: every gate the campaign
    lists must be in it, or the approval (and a run under it) is refused."""
    from harness.base.catalogue import APPROVAL_GATES_FAILED
    from harness.judge.approval import basis as approval_gates
    from tests.approval_helpers import gate_record

    seal = "sha256:" + "a" * 64
    folder = gate_record(tmp_path / "rec", "camp", seal, commit="c" * 40)
    summary, found = approval_gates.read(folder, approval_gates.Wanted("camp", ("unit",), seal,
                                                                       "c" * 40))
    assert summary is not None and found == []
    _, found = approval_gates.read(folder, approval_gates.Wanted("camp", ("unit", "mutation"),
                                                                 seal, "c" * 40))
    assert [rule for rule, _ in found] == [APPROVAL_GATES_FAILED]
    assert "mutation did not run" in found[0][1]


def test_allowed_signers_is_sealed_and_must_exist(tmp_path):
    """Who may approve is part of what was reviewed: swapping the allowed-signers file
    changes the source seal; naming a file that is not there is a fault at check."""
    from harness.config.loader import load_campaign

    (tmp_path / "images.lock").write_text("images:\n  img:\n    id: sha256:" + "a" * 64 + "\n")
    (tmp_path / "controls").mkdir()
    (tmp_path / "controls" / "c1.yaml").write_text(
        "name: c1\nimage: img\ndevice: cpu\ncommand: [python3, -V]\n")
    camp = tmp_path / "campaigns" / "camp.yaml"
    camp.parent.mkdir()
    camp.write_text("name: camp\nrow: R\ncontrols: [c1]\nrequire_approval: true\n"
                    "allowed_signers: ../signers\n")
    loaded, faults = load_campaign(camp)
    assert loaded is None and any(":5:" in str(f) and "allowed_signers" in str(f)
                                  for f in faults), faults
    (tmp_path / "signers").write_text("someone namespaces=\"x\" ssh-ed25519 AAAA\n")
    loaded, faults = load_campaign(camp)
    assert faults == [] and tmp_path / "signers" in loaded.files()

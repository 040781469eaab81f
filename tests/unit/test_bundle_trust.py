"""Who vouches for what in a bundle, and what each path takes on trust.

`bundle verify`: the bag's own signature (harness-evidence) vouches for its bytes, each
carried approval's `.sig` (harness-approval@v1) for the reviewer; given allowed signers,
what that policy asks for and the bundle lacks is refused, and a stripped signature is
refused whatever the options. `bundle merge` signs only what it authenticated. A drop
bundle places only the run it is named for, by the one rule the night's collect applies
too. Each table plays an attacker's variants against the one rule that decides them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from bundle_helpers import (
    make_approved_run,
    make_keys,
    make_run,
    pack,
    retag,
    seal,
    writable_bundle,
)

from harness.base.errors import InvalidInput
from harness.cli.bundle import bundle
from harness.probe.sshsig import sign as sign_in
from harness.readers.bundle.collect import RECORD, admits, collect_drop, collect_run, drop_run
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.merge import MergeRefused, merge_bundles
from harness.readers.bundle.verify import verify_bundle, verify_tree

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")

APPROVAL_NS = "harness-approval@v1"
BAG_SIG = "tagmanifest-sha256.txt.sig"
APPROVAL = "metadata/approvals/camp-bbbbbbbbbbbb.json"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """op signs bundles, rev signs approvals, mallory is listed for nothing: `allowed`
    trusts op for harness-evidence only and rev for harness-approval@v1 only. `good` is
    the bundle of one approved run, the approval signed by rev, the bag by op."""
    tmp = tmp_path_factory.mktemp("trust")
    op, op_line = make_keys(tmp, "op")
    rev, rev_line = make_keys(tmp, "rev", APPROVAL_NS)
    mallory, _ = make_keys(tmp, "mallory", APPROVAL_NS)
    allowed = tmp / "allowed"
    allowed.write_text(op_line + rev_line)
    good = tmp / "good.tar.gz"
    export_bundle([make_approved_run(tmp / "signed", "run-a", rev)], good, op)
    return SimpleNamespace(tmp=tmp, op=op, rev=rev, mallory=mallory, allowed=allowed,
                           good=good)


def _kinds(report) -> set[str]:
    return {p.kind for p in report.problems}


# ---- verify: who vouches for the approval -----------------------------------------------------

def _approval_sig(world, root: Path, variant: str) -> None:
    """The approval's `.sig` as an attacker leaves it (re-signing the bag is up to the bag
    variant)."""
    approval = root / APPROVAL
    sig = approval.with_name(approval.name + ".sig")
    data = approval.read_bytes()
    made = {
        "good": None,
        "missing": b"",
        "other-bytes": lambda: sign_in(b'{"another": "approval"}\n', world.rev),
        "bundle-key": lambda: sign_in(data, world.op),  # op: trusted for bundles only
        "bundle-namespace": lambda: sign_in(data, world.op, "harness-evidence"),
        "reviewer-wrong-namespace": lambda: sign_in(data, world.rev, "harness-evidence"),
        "unlisted": lambda: sign_in(data, world.mallory),
        "not-a-signature": lambda: b"-----BEGIN SSH SIGNATURE-----\nAAAA\n"
                                   b"-----END SSH SIGNATURE-----\n",
    }[variant]
    if made == b"":
        sig.unlink()
    elif made is not None:
        sig.write_bytes(made())


def _bag(world, root: Path, variant: str) -> None:
    """The bag as the forger (who holds the operator's key, or none) hands it on."""
    if variant == "signed":
        retag(root, world.op)
    elif variant == "unsigned":  # rebuilt from scratch: no signature, no word of one
        retag(root, claim=False)
    elif variant == "stripped":  # its .sig deleted, bag-info kept: it says it was signed
        retag(root)
    elif variant == "foreign":  # signed by a key no one listed for bundles
        retag(root, world.rev)


def _expected(bag: str, approval: str, checked: bool) -> set[str]:
    """The policy's table (docs/bundles.md, "Who vouches for what"), written out."""
    kinds = set()
    if bag == "stripped":
        kinds.add("signature-stripped")
    elif checked and bag == "unsigned":
        kinds.add("unsigned")
    elif checked and bag == "foreign":
        kinds.add("bad-signature")
    elif not checked and bag in ("signed", "foreign"):
        kinds.add("unverified-signature")
    if checked and approval != "good":
        kinds.add("approval-unsigned" if approval == "missing" else "approval-signature")
    return kinds


APPROVAL_VARIANTS = ["good", "missing", "other-bytes", "bundle-key", "bundle-namespace",
                     "reviewer-wrong-namespace", "unlisted", "not-a-signature"]
BAG_VARIANTS = ["signed", "unsigned", "stripped", "foreign"]


@pytest.mark.parametrize(("bag", "approval"), list(itertools.product(BAG_VARIANTS,
                                                                       APPROVAL_VARIANTS)))
def test_every_bag_and_approval_signature_against_the_policy(world, tmp_path, bag, approval):
    root = writable_bundle(world.good, tmp_path / "x")
    _approval_sig(world, root, approval)
    _bag(world, root, bag)
    for allowed in (world.allowed, None):
        report = verify_tree(root, allowed)
        assert _kinds(report) == _expected(bag, approval, allowed is not None), \
            (allowed, report.problems)
        assert all(p.path in (BAG_SIG, f"{APPROVAL}.sig") for p in report.problems)


def test_each_refusal_names_its_rule(world, tmp_path):
    root = writable_bundle(world.good, tmp_path / "x")
    (root / f"{APPROVAL}.sig").unlink()
    retag(root, world.op)
    [problem] = verify_tree(root, world.allowed).problems
    assert problem.kind == "approval-unsigned"
    assert problem.detail.startswith("BUNDLE-APPROVAL-UNSIGNED: ")
    retag(root)
    assert {p.detail.split(":")[0] for p in verify_tree(root).problems} == {
        "BUNDLE-SIGNATURE-STRIPPED"}


def test_a_run_approved_without_a_signature_is_not_vouched_for_by_the_bundle_key(world,
                                                                                 tmp_path):
    """The operator's signature over a bag holding a self-written (unsigned) approval: the
    bag's bytes are vouched for, the approval is not, so the bundle is refused."""
    out = tmp_path / "e.tar.gz"
    export_bundle([make_approved_run(tmp_path, "run-u", None)], out, world.op)
    report = verify_bundle(out, world.allowed)
    assert [(p.kind, p.path) for p in report.problems] == [("approval-unsigned",
                                                            f"{APPROVAL}.sig")]
    assert verify_bundle(out, world.allowed).vouches[0].signer == "op@example"


def test_an_approval_signature_moved_between_runs_is_refused(world, tmp_path):
    """Two runs, two approvals, each signed by the reviewer: swapping their .sig files (and
    re-signing the bag) leaves each approval with a good signature of other bytes."""
    runs = [make_approved_run(tmp_path, f"run-{c}", world.rev, campaign=f"camp{c}", row=i)
            for i, c in enumerate("xy")]
    out = tmp_path / "two.tar.gz"
    export_bundle(runs, out, world.op)
    assert verify_bundle(out, world.allowed).ok
    root = writable_bundle(out, tmp_path / "x")
    x, y = (root / f"metadata/approvals/camp{c}-bbbbbbbbbbbb.json.sig" for c in "xy")
    sig_x = x.read_bytes()
    x.write_bytes(y.read_bytes())
    y.write_bytes(sig_x)
    retag(root, world.op)
    report = verify_tree(root, world.allowed)
    assert sorted((p.kind, Path(p.path).name) for p in report.problems) == [
        ("approval-signature", "campx-bbbbbbbbbbbb.json.sig"),
        ("approval-signature", "campy-bbbbbbbbbbbb.json.sig")]


def _cli(capsys, *argv: str) -> SimpleNamespace:
    """`harness bundle ARGV...` as the command line runs it: exit code, stdout, stderr."""
    from harness.cli.main import cli, main

    cli.add_command(bundle)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["bundle", *argv])
    said = capsys.readouterr()
    return SimpleNamespace(exit_code=exited.value.code or 0, output=said.out, err=said.err)


def test_verify_says_which_signer_vouched_for_what(world, capsys):
    result = _cli(capsys, "verify", str(world.good), "--allowed-signers", str(world.allowed))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[2] == ("  vouched: the bag's bytes tagmanifest-sha256.txt: good signature by "
                        "op@example (harness-evidence)")
    assert lines[3] == (f"  vouched: the reviewer's approval {APPROVAL}: good signature by "
                        f"rev@example ({APPROVAL_NS})")
    doc = json.loads(_cli(capsys, "verify", str(world.good), "--allowed-signers",
                          str(world.allowed), "--json").output)
    assert doc["vouches"] == [
        {"for": "bag", "path": "tagmanifest-sha256.txt", "namespace": "harness-evidence",
         "state": "good", "signer": "op@example"},
        {"for": "approval", "path": APPROVAL, "namespace": APPROVAL_NS, "state": "good",
         "signer": "rev@example"}]


def test_an_unsigned_bundle_says_nobody_vouches_and_approvals_are_not_checked(tmp_path, capsys):
    out = tmp_path / "plain.tar.gz"
    export_bundle([make_approved_run(tmp_path, "run-p", None)], out)
    result = _cli(capsys, "verify", str(out))
    assert result.exit_code == 0, result.output
    assert "  vouched: the bag's bytes tagmanifest-sha256.txt: unsigned: nobody vouches for " \
           "it" in result.output
    assert f"  vouched: the reviewer's approval {APPROVAL}: unsigned" in result.output


def test_a_stripped_signature_is_refused_by_the_cli_without_signers(world, tmp_path, capsys):
    root = writable_bundle(world.good, tmp_path / "x")
    (root / BAG_SIG).unlink()
    stripped = pack(root, tmp_path / "stripped.tar.gz")
    result = _cli(capsys, "verify", str(stripped))
    assert result.exit_code == 1
    assert f"FAIL signature-stripped: {BAG_SIG}: BUNDLE-SIGNATURE-STRIPPED" in result.output


# ---- merge: never signs what nobody authenticated ----------------------------------------------

def _stripped(world, tmp_path: Path, name: str) -> Path:
    root = writable_bundle(world.good, tmp_path / f"unpacked-{name}")
    (root / BAG_SIG).unlink()
    return pack(root, tmp_path / f"{name}.tar.gz")


def test_a_signing_key_without_allowed_signers_is_a_usage_error(world, tmp_path, capsys):
    plain = tmp_path / "plain.tar.gz"
    export_bundle([make_run(tmp_path / "h", "run-b")], plain)
    out = tmp_path / "m.tar.gz"
    with pytest.raises(InvalidInput, match="--allowed-signers"):
        merge_bundles([plain], out, world.op)
    assert not out.exists()
    result = _cli(capsys, "merge", str(plain), "-o", str(out), "--sign-key", str(world.op))
    assert result.exit_code == 2 and "--allowed-signers" in result.err
    assert not out.exists()


def _merge_input(world, tmp_path: Path, variant: str) -> Path:
    """One input of a signing merge, as it arrives."""
    if variant == "good":
        return world.good
    if variant == "stripped":
        return _stripped(world, tmp_path, variant)
    out = tmp_path / f"{variant}.tar.gz"
    run_id = f"run-{variant}"
    if variant == "unsigned":  # a forgery with no signature at all
        export_bundle([make_run(tmp_path / variant, run_id)], out)
    elif variant == "foreign-bag":
        export_bundle([make_run(tmp_path / variant, run_id)], out, world.mallory)
    elif variant == "approval-stripped":  # the operator drops rev's .sig, re-signs the bag
        root = writable_bundle(world.good, tmp_path / f"unpacked-{variant}")
        (root / f"{APPROVAL}.sig").unlink()
        retag(root, world.op)
        pack(root, out)
    return out


MERGE_VARIANTS = {"good": set(), "unsigned": {"unsigned"},
                  "stripped": {"signature-stripped"}, "foreign-bag": {"bad-signature"},
                  "approval-stripped": {"approval-unsigned"}}


@pytest.mark.parametrize(("first", "second"), [("good", v) for v in MERGE_VARIANTS])
def test_a_signing_merge_verifies_every_input_under_the_policy(world, tmp_path, first, second):
    """One genuine input and one attacker's: the merge signs only when both verify as
    `bundle verify --allowed-signers` would, and a refusal names the bad input alone."""
    inputs = [_merge_input(world, tmp_path, first), _merge_input(world, tmp_path, second)]
    out = tmp_path / "merged.tar.gz"
    if not MERGE_VARIANTS[second]:
        assert merge_bundles(inputs, out, world.op, world.allowed).signed
        assert verify_bundle(out, world.allowed).ok
        return
    with pytest.raises(MergeRefused) as refused:
        merge_bundles(inputs, out, world.op, world.allowed)
    assert {p.kind for p in refused.value.problems} == MERGE_VARIANTS[second]
    assert all(p.path.startswith(str(inputs[1])) for p in refused.value.problems)
    assert not out.exists()


def test_a_stripped_input_is_refused_without_a_key_too_never_merged_as_unsigned(world,
                                                                               tmp_path):
    stripped = _stripped(world, tmp_path, "s")
    with pytest.raises(MergeRefused) as refused:
        merge_bundles([stripped], tmp_path / "m.tar.gz")
    assert [p.kind for p in refused.value.problems] == ["signature-stripped"]


def test_a_merged_bundle_says_it_is_signed_and_a_nested_strip_is_refused(world, tmp_path):
    """Merge of merges: the merged bag says it was signed as any export does, so stripping
    its signature and merging it again (with or without a key) is refused."""
    other = tmp_path / "other.tar.gz"
    export_bundle([make_run(tmp_path / "h", "run-o")], other, world.op)
    first = tmp_path / "first.tar.gz"
    merge_bundles([world.good, other], first, world.op, world.allowed)
    report = verify_bundle(first, world.allowed)
    assert report.ok and [v.signer for v in report.vouches] == ["op@example", "rev@example"]
    root = writable_bundle(first, tmp_path / "x")
    (root / BAG_SIG).unlink()
    stripped = pack(root, tmp_path / "first-stripped.tar.gz")
    for key, allowed in ((None, None), (world.op, world.allowed)):
        with pytest.raises(MergeRefused) as refused:
            merge_bundles([stripped, other], tmp_path / "again.tar.gz", key, allowed)
        assert [p.kind for p in refused.value.problems
                if p.path.startswith(str(stripped))] == ["signature-stripped"]


def test_merge_prints_each_inputs_digest_and_who_vouched(world, tmp_path, capsys):
    out = tmp_path / "m.tar.gz"
    result = _cli(capsys, "merge", str(world.good), "-o", str(out), "--sign-key", str(world.op),
                  "--allowed-signers", str(world.allowed))
    assert result.exit_code == 0, result.output
    digest = hashlib.sha256(world.good.read_bytes()).hexdigest()
    assert f"input {world.good}: sha256 {digest}" in result.output
    assert f"  vouched: the reviewer's approval {APPROVAL}: good signature by rev@example" \
        in result.output


# ---- collect: a drop bundle places only the run it is named for --------------------------------

def _export(tmp: Path, out: Path, *run_ids: str, calls_itself: str | None = None) -> Path:
    """A drop bundle holding `run_ids` (forged: each its own bytes, row 9)."""
    runs = []
    for run_id in run_ids:
        run = make_run(tmp / f"src-{out.name}", run_id, row=9)
        if calls_itself is not None:
            record = json.loads((run / "run.json").read_text())
            record["run_id"] = calls_itself
            (run / "run.json").write_text(json.dumps(record))
            seal(run)
        runs.append(run)
    export_bundle(runs, out)
    return out


def _drop(tmp: Path) -> tuple[Path, Path]:
    drop, runs = tmp / "drop", tmp / "RUNS"
    (drop / "bundles").mkdir(parents=True)
    return drop, runs


def _genuine(tmp: Path, drop: Path, run_id: str = "run-r") -> bytes:
    """The host's own export of `run_id` into the drop; returns its run's SHA256SUMS."""
    run = make_run(tmp / "host", run_id)
    export_bundle([run], drop / "bundles" / f"{run_id}.tar.gz")
    return (run / "SHA256SUMS").read_bytes()


# (what the drop bundle run-r.tar.gz holds) -> placed?
NAMED_FOR_R = {
    "run-r": True,
    "run-other": False,
    "run-r and run-other": False,
    "run-r calling itself run-other": False,
}


@pytest.mark.parametrize("held", sorted(NAMED_FOR_R))
def test_the_command_and_the_night_apply_one_rule(tmp_path, held):
    """Whatever `<drop>/bundles/run-r.tar.gz` holds, `bundle collect` and the night's own
    collect as the job ends decide alike: only run-r, and nothing of any other bundle."""
    verdicts = []
    for who in ("command", "night"):
        drop, runs = _drop(tmp_path / who)
        ids = held.split(" calling itself ")[0].split(" and ")
        calls = held.split(" calling itself ")[1] if " calling itself " in held else None
        _export(tmp_path / who, drop / "bundles" / "run-r.tar.gz", *ids, calls_itself=calls)
        if who == "command":
            (arrival,) = collect_drop(drop, runs)
        else:
            arrival = collect_run(drop, runs, "run-r")
        placed = sorted(p.name for p in runs.iterdir() if p.name != RECORD)
        verdicts.append((arrival.ok, arrival.unpacked, placed,
                         [p.split(":")[0] for p in arrival.problems]))
    assert verdicts[0] == verdicts[1]
    ok, unpacked, placed, rules = verdicts[0]
    if NAMED_FOR_R[held]:
        assert (ok, unpacked, placed, rules) == (True, ["run-r"], ["run-r"], [])
    else:
        assert (ok, unpacked, placed, rules) == (False, [], [], ["BUNDLE-DROP-OTHER-RUN"])


@pytest.mark.parametrize("forgery", ["a-copy.tar.gz", "run-a.tar.gz", "run-r.tar",
                                     "run-r.tgz", "0-first.tar.gz"])
def test_a_forged_copy_in_another_file_never_preempts_the_genuine_bundle(tmp_path, forgery):
    """A forged run-r in a file of another name (sorted before run-r.tar.gz, so collected
    first): refused, by its name or by what it holds, and the genuine run-r is placed."""
    drop, runs = _drop(tmp_path)
    _export(tmp_path, drop / "bundles" / forgery, "run-r")
    genuine = _genuine(tmp_path, drop)
    arrivals = {a.bundle: a for a in collect_drop(drop, runs)}
    assert not arrivals[forgery].ok and not arrivals[forgery].unpacked
    rule = "BUNDLE-DROP-OTHER-RUN" if forgery.endswith(".tar.gz") else "BUNDLE-DROP-NAME"
    assert arrivals[forgery].problems[0].startswith(rule)
    assert arrivals["run-r.tar.gz"].unpacked == ["run-r"] and arrivals["run-r.tar.gz"].ok
    assert (runs / "run-r" / "SHA256SUMS").read_bytes() == genuine
    assert sorted(p.name for p in runs.iterdir()) == [RECORD, "run-r"]


def test_a_refused_bundle_does_not_poison_the_genuine_one_that_follows(tmp_path):
    """run-r.tar.gz holds run-r and a planted run-x: refused whole, neither placed, and the
    host's genuine bundle, once it takes that name, is collected on the next pass."""
    drop, runs = _drop(tmp_path)
    path = _export(tmp_path, drop / "bundles" / "run-r.tar.gz", "run-r", "run-x")
    (first,) = collect_drop(drop, runs)
    assert not first.ok and not (runs / "run-r").exists() and not (runs / "run-x").exists()
    path.unlink()
    genuine = _genuine(tmp_path, drop)
    (second,) = collect_drop(drop, runs)
    assert second.ok and second.unpacked == ["run-r"]
    assert (runs / "run-r" / "SHA256SUMS").read_bytes() == genuine
    records = [json.loads(line) for line in (runs / RECORD).read_text().splitlines()]
    assert [r["ok"] for r in records] == [False, True]


def test_a_symlinked_drop_file_is_refused_unread_and_a_real_one_later_is_taken(tmp_path):
    drop, runs = _drop(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = _export(tmp_path, elsewhere / "run-r.tar.gz", "run-r")
    (drop / "bundles" / "run-r.tar.gz").symlink_to(target)
    (arrival,) = collect_drop(drop, runs)
    assert not arrival.ok and arrival.sha256 == ""
    assert arrival.problems[0].startswith("BUNDLE-DROP-NAME")
    assert collect_run(drop, runs, "run-r") is None  # the night never follows it either
    assert not (runs / "run-r").exists() and not (runs / RECORD).exists()
    (drop / "bundles" / "run-r.tar.gz").unlink()
    genuine = _genuine(tmp_path, drop)
    (arrival,) = collect_drop(drop, runs)
    assert arrival.ok and (runs / "run-r" / "SHA256SUMS").read_bytes() == genuine


def test_collect_refuses_an_unsigned_or_stripped_bundle_under_allowed_signers(world, tmp_path):
    drop, runs = _drop(tmp_path)
    _genuine(tmp_path, drop, "run-u")  # unsigned
    shutil.copy(_stripped(world, tmp_path, "s"), drop / "bundles" / "run-a.tar.gz")
    arrivals = {a.bundle: a for a in collect_drop(drop, runs, world.allowed)}
    assert "unsigned" in arrivals["run-u.tar.gz"].problems[0]
    assert "signature-stripped" in arrivals["run-a.tar.gz"].problems[0]
    assert sorted(p.name for p in runs.iterdir()) == [RECORD]


@pytest.mark.parametrize(("name", "run_id"), [
    ("run-r.tar.gz", "run-r"), ("r.1.tar.gz", "r.1"), ("run-r.tgz", None),
    ("run-r.tar", None), (".run-r.tar.gz", None), ("-r.tar.gz", None), (".tar.gz", None),
    ("run-r.TAR.GZ", None), ("run r.tar.gz", None), ("run-r.tar.gz.tmp", None),
    ("a" * 200 + ".tar.gz", "a" * 200), ("a" * 201 + ".tar.gz", None),
])
def test_a_drop_file_is_named_for_one_run_or_none(name, run_id):
    assert drop_run(name) == run_id


def test_admits_only_the_named_run_alone():
    assert admits("r", ["data/r"], ["r"], "r") is None
    assert admits("r", ["data/r"], ["r"], None) is None  # an older run.json: no run_id
    for runs, folders, recorded in ((["data/x"], ["x"], "x"), (["data/r", "data/x"],
                                                               ["r", "x"], None),
                                    (["data/r"], ["night", "r"], "r"), (["data/r"], ["r"], "x"),
                                    ([], [], None), (["data/r"], ["r"], {"r": 1})):
        why = admits("r", runs, folders, recorded)
        assert why is not None and why.startswith("BUNDLE-DROP-OTHER-RUN: ")


def test_a_hostile_tar_named_for_a_run_is_refused_and_places_nothing(tmp_path):
    drop, runs = _drop(tmp_path)
    with tarfile.open(drop / "bundles" / "run-r.tar.gz", "w") as tar:
        tar.addfile(tarfile.TarInfo("top/../../run-r"))
    (arrival,) = collect_drop(drop, runs)
    assert not arrival.ok and "hostile" in arrival.problems[0]
    assert not (tmp_path / "run-r").exists() and not (runs / "run-r").exists()

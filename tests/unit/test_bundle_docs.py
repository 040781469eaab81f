"""The "Verifying without the harness" recipe in docs/bundles.md really works, run exactly
as printed: no variable is set for it, it is pasted into a shell as a whole. Its last line
is its verdict, and it is `harness bundle verify`'s on the same bundle with the same keys
(one signers file or two); a second paste in the same folder fails and touches nothing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from bundle_helpers import (
    make_approved_run,
    make_keys,
    make_run,
    pack,
    rebag,
    retag,
    seal,
    writable_bundle,
)

from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.verify import verify_bundle

DOC = Path(__file__).resolve().parents[2] / "docs" / "bundles.md"


def doc_script(tag: str) -> str:
    """The shell block that follows `<!-- bundle-doc-test: TAG -->` in the docs."""
    match = re.search(rf"<!-- bundle-doc-test: {tag} -->\n```sh\n(.*?)```", DOC.read_text(),
                      re.DOTALL)
    assert match, f"docs/bundles.md has no {tag} block"
    return match.group(1)


def run_script(script: str, cwd: Path, *, after: str = "") -> subprocess.CompletedProcess:
    """The block as a person pastes it into bash in `cwd` (then `after`, typed next)."""
    env = {k: v for k, v in os.environ.items() if k not in ("BUNDLE", "ALLOWED_SIGNERS")}
    return subprocess.run(["bash", "-c", script + after], cwd=cwd, capture_output=True,
                          text=True, env=env, check=False)


def test_coreutils_recipe_accepts_a_good_bundle(tmp_path):
    make_run(tmp_path / "gpu-runs", "r1")
    make_run(tmp_path / "gpu-runs", "r2", row=1)
    export_bundle([tmp_path / "gpu-runs" / "r1", tmp_path / "gpu-runs" / "r2"],
                  tmp_path / "evidence.tar.gz")
    result = run_script(doc_script("coreutils"), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bundle verified" in result.stdout


def _retar(root: Path, out: Path) -> None:
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname=root.name)


@pytest.mark.parametrize("tamper", ["payload", "extra-payload", "tag", "broken-run"])
def test_coreutils_recipe_rejects_tampering(tmp_path, tamper):
    run = make_run(tmp_path / "gpu-runs", "r1")
    export_bundle([run], tmp_path / "good.tar.gz")
    work = tmp_path / "work"
    work.mkdir()
    with tarfile.open(tmp_path / "good.tar.gz") as tar:
        tar.extractall(work, filter="data")
    root = next(work.iterdir())
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    if tamper == "payload":
        (root / "data/r1/logs/stdout.log").write_text("tampered\n")
    elif tamper == "extra-payload":
        (root / "data/r1/smuggled.txt").write_text("x\n")
    elif tamper == "tag":
        (root / "bag-info.txt").write_text("Campaign: something else\n")
    else:  # the bag made to agree with a rewritten log: only the run's own SHA256SUMS knows
        (root / "data/r1/logs/stdout.log").write_text("rewritten\n")
        rebag(root)
    _retar(root, tmp_path / "evidence.tar.gz")
    result = run_script(doc_script("coreutils"), tmp_path)
    assert result.returncode != 0
    assert "bundle verified" not in result.stdout


def test_a_failing_check_stops_the_block_but_not_the_shell_it_was_pasted_into(tmp_path):
    run = make_run(tmp_path / "gpu-runs", "r1")
    export_bundle([run], tmp_path / "good.tar.gz")
    root = writable_bundle(tmp_path / "good.tar.gz", tmp_path / "x")
    (root / "data/r1/logs/stdout.log").write_text("tampered\n")
    pack(root, tmp_path / "evidence.tar.gz")
    result = run_script(doc_script("coreutils"), tmp_path, after="\necho still-here $?\n")
    assert "bundle verified" not in result.stdout
    assert result.stdout.splitlines()[-1] == "still-here 1", result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
def test_the_signature_is_checked_first_against_the_allowed_signers_file(tmp_path):
    key, line = make_keys(tmp_path, "alice")
    _, other = make_keys(tmp_path, "mallory")
    run = make_run(tmp_path / "gpu-runs", "r1", full=False)
    export_bundle([run], tmp_path / "evidence.tar.gz", sign_key=key)
    script = doc_script("coreutils")
    assert script.index("ssh-keygen -Y verify") < script.index(
        "sha256sum --strict --quiet -c tagmanifest-sha256.txt")

    (tmp_path / "allowed_signers").write_text(line)
    good = run_script(script, tmp_path)
    assert good.returncode == 0, good.stderr
    assert 'Good "harness-evidence" signature for alice@example' in good.stdout + good.stderr
    assert "bundle verified" in good.stdout

    for trusted in (other, None):  # signed by a key nobody listed; no allowed_signers at all
        shutil.rmtree(tmp_path / "review")
        if trusted is None:
            (tmp_path / "allowed_signers").unlink()
        else:
            (tmp_path / "allowed_signers").write_text(trusted)
        bad = run_script(script, tmp_path)
        assert bad.returncode != 0 and "bundle verified" not in bad.stdout


def _nested_record(folder: Path, status: str = "accepted") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"schema": "harness.run/v1", "run_id": "r1",
                                                 "status": status}))


def _sums_of(folder: Path, names: list[str], *, lie: bool = False) -> None:
    """A SHA256SUMS in `folder` over `names`; with `lie`, over digests and files that are
    not there (only a run's seal may make the recipe check it)."""
    lines = [f"{'0' * 64 if lie else hashlib.sha256((folder / n).read_bytes()).hexdigest()}"
             f"  {n}\n" for n in names]
    (folder / "SHA256SUMS").write_text("".join(lines) + ("0" * 64 + "  ghost.json\n"
                                                         if lie else ""))


def _reseal(run: Path) -> None:
    (run / "SHA256SUMS").unlink()
    seal(run)


def _addendum_with_record(run: Path) -> None:
    addendum = run / "addenda" / "20261201T000000Z-refinalize"
    _nested_record(addendum)
    _sums_of(addendum, ["run.json"])


# A run.json below a run (the workload's observations/, an addendum) does not make a run:
# `harness bundle verify` (payload.find_run_dirs) and the recipe judge each case alike.
# sealed: the run's own seal lists what was planted (the workload wrote it during the run);
# otherwise it was planted after sealing, and the bag made to agree.
NESTED_RECORDS: dict[str, tuple[bool, Callable[[Path], None], bool]] = {
    "observations-run-json": (True, lambda r: _nested_record(r / "observations"), True),
    "observations-run-json-and-sums": (
        True, lambda r: (_nested_record(r / "observations"),
                         _sums_of(r / "observations", ["run.json"])), True),
    "observations-run-json-and-lying-sums": (
        True, lambda r: (_nested_record(r / "observations"),
                         _sums_of(r / "observations", ["run.json"], lie=True)), True),
    "addendum-run-json": (True, _addendum_with_record, True),
    "planted-observations-run-json": (
        False, lambda r: _nested_record(r / "observations"), False),
    "planted-observations-run-json-and-sums": (
        False, lambda r: (_nested_record(r / "observations"),
                          _sums_of(r / "observations", ["run.json"])), False),
}


@pytest.mark.parametrize("case", sorted(NESTED_RECORDS))
def test_coreutils_recipe_and_harness_agree_on_a_nested_run_json(tmp_path, case):
    sealed, plant, ok = NESTED_RECORDS[case]
    run = make_run(tmp_path / "gpu-runs", "r1")
    if sealed:
        plant(run)
        _reseal(run)
        export_bundle([run], tmp_path / "evidence.tar.gz")
    else:
        export_bundle([run], tmp_path / "good.tar.gz")
        root = writable_bundle(tmp_path / "good.tar.gz", tmp_path / "x")
        plant(root / "data" / "r1")
        rebag(root)
        pack(root, tmp_path / "evidence.tar.gz")
    report = verify_bundle(tmp_path / "evidence.tar.gz")
    assert report.ok is ok, report.problems
    assert report.runs == ["data/r1"]
    result = run_script(doc_script("coreutils"), tmp_path)
    assert (result.returncode == 0) is ok, result.stdout + result.stderr
    assert ("bundle verified" in result.stdout) is ok
    assert (tmp_path / "review" / "runs.txt").read_text() == "data/r1\n"


# Who vouches for what (docs/bundles.md): the recipe plays `--allowed-signers` with the
# allowed_signers file being there, and agrees with the harness case by case.
# (bag, the approval's .sig, allowed_signers there) -> verified
VOUCHES = {
    ("signed", "good", True): True,
    ("signed", "missing", True): False,  # the operator's key cannot vouch for the reviewer
    ("signed", "bundle-key", True): False,  # op's key, in the approvals' namespace
    ("signed", "other-bytes", True): False,  # the reviewer's signature of another approval
    ("unsigned", "good", True): False,  # signers given: an unsigned bag is refused
    ("stripped", "good", True): False,
    ("stripped", "good", False): False,  # bag-info says signed: the .sig was deleted
    ("signed", "good", False): False,  # an unchecked signature proves nothing
    ("unsigned", "good", False): True,
    ("unsigned", "missing", False): True,  # nothing authenticated, nothing asked
}


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
@pytest.mark.parametrize("case", sorted(VOUCHES), ids=lambda c: "-".join(
    [c[0], c[1], "listed" if c[2] else "no-signers"]))
def test_coreutils_recipe_and_harness_agree_on_who_vouches(tmp_path, case):
    from harness.probe.sshsig import sign as sign_in
    from harness.readers.bundle.verify import verify_tree

    bag, approval, listed = case
    keys = tmp_path / "keys"
    keys.mkdir()
    op, op_line = make_keys(keys, "op")
    rev, rev_line = make_keys(keys, "rev", "harness-approval@v1")
    export_bundle([make_approved_run(tmp_path, "r1", rev)], tmp_path / "good.tar.gz", op)
    root = writable_bundle(tmp_path / "good.tar.gz", tmp_path / "x")
    [doc] = (root / "metadata" / "approvals").glob("*.json")
    sig = doc.with_name(doc.name + ".sig")
    if approval == "missing":
        sig.unlink()
    elif approval == "bundle-key":
        sig.write_bytes(sign_in(doc.read_bytes(), op))
    elif approval == "other-bytes":
        sig.write_bytes(sign_in(b"{}\n", rev))
    {"signed": lambda: retag(root, op), "unsigned": lambda: retag(root, claim=False),
     "stripped": lambda: retag(root)}[bag]()
    pack(root, tmp_path / "evidence.tar.gz")
    allowed = tmp_path / "allowed_signers"
    if listed:
        allowed.write_text(op_line + rev_line)
    assert verify_tree(root, allowed if listed else None).ok is VOUCHES[case]
    result = run_script(doc_script("coreutils"), tmp_path)
    assert (result.returncode == 0) is VOUCHES[case], result.stdout + result.stderr
    assert ("bundle verified" in result.stdout) is VOUCHES[case]
    if VOUCHES[case] and listed:
        said = result.stdout + result.stderr
        assert 'Good "harness-evidence" signature for op@example' in said
        assert 'Good "harness-approval@v1" signature for rev@example' in said


# The recipe's last line is its verdict, and it is `harness bundle verify`'s: the same
# bundles, the same keys, in one signers file or two (docs/bundles.md: `allowed_signers`
# plays --allowed-signers, `reviewers` plays --reviewers).
VERIFIED = "bundle verified"
NOT_VERIFIED = "bundle NOT verified: the check above failed"


def harness_verdict(bundle: Path, folder: Path) -> int:
    """`harness bundle verify`'s exit code, with the options the files in `folder` play."""
    import sys

    args = [sys.executable, "-m", "harness", "bundle", "verify", str(bundle)]
    for option, name in (("--allowed-signers", "allowed_signers"), ("--reviewers", "reviewers")):
        if (folder / name).exists():
            args += [option, str(folder / name)]
    return subprocess.run(args, capture_output=True, text=True, check=False).returncode


def recipe_verdict(folder: Path) -> tuple[int, str]:
    """The recipe pasted in `folder`: its exit code and the last line it printed."""
    result = run_script(doc_script("coreutils"), folder)
    lines = result.stdout.splitlines()
    return result.returncode, lines[-1] if lines else ""


def assert_agree(folder: Path, expect_ok: bool) -> None:
    """Tool and recipe give the verdict expected, by exit code (0 or 1) and last line."""
    tool = harness_verdict(folder / "evidence.tar.gz", folder)
    code, last = recipe_verdict(folder)
    assert tool == (0 if expect_ok else 1), tool
    assert (code, last) == ((0, VERIFIED) if expect_ok else (1, NOT_VERIFIED)), (code, last)


def test_the_recipe_says_what_bundle_verify_says_of_a_good_and_a_tampered_bundle(tmp_path):
    make_run(tmp_path / "gpu-runs", "r1")
    export_bundle([tmp_path / "gpu-runs" / "r1"], tmp_path / "evidence.tar.gz")
    assert_agree(tmp_path, True)
    bad = tmp_path / "bad"
    root = writable_bundle(tmp_path / "evidence.tar.gz", bad / "x")
    (root / "data/r1/logs/stdout.log").write_text("tampered\n")
    pack(root, bad / "evidence.tar.gz")
    assert_agree(bad, False)


def test_a_second_paste_in_the_same_folder_fails_loudly_and_unpacks_nothing(tmp_path):
    make_run(tmp_path / "gpu-runs", "r1")
    export_bundle([tmp_path / "gpu-runs" / "r1"], tmp_path / "evidence.tar.gz")
    assert recipe_verdict(tmp_path) == (0, VERIFIED)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    again = run_script(doc_script("coreutils"), tmp_path)
    assert again.returncode == 1
    assert again.stdout.splitlines()[-1] == NOT_VERIFIED, again.stdout
    assert "review" in again.stderr and "File exists" in again.stderr, again.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def _approved_bundle(tmp_path: Path) -> tuple[Path, dict[str, tuple[Path, str]]]:
    """A bundle signed by op, of a run whose approval rev signed; the keys by name, each
    (private key, allowed_signers line), the reviewers' for harness-approval@v1."""
    keys = tmp_path / "keys"
    keys.mkdir()
    made = {"op": make_keys(keys, "op")}
    for name in ("rev", "eve"):
        made[name] = make_keys(keys, name, "harness-approval@v1")
    run = make_approved_run(tmp_path / "src", "r1", made["rev"][0])
    export_bundle([run], tmp_path / "evidence.tar.gz", made["op"][0])
    return tmp_path / "evidence.tar.gz", made


# (who signed the approval, which keys each file lists) -> verified.
# one file: allowed_signers alone; two: allowed_signers (op) and reviewers.
SIGNERS = {
    ("rev", ("op", "rev"), None): True,
    ("rev", ("op",), ("rev",)): True,
    ("rev", ("op", "rev"), ("eve",)): False,  # reviewers given: allowed_signers' rev is not asked
    ("rev", ("op", "eve"), None): False,  # signed by a key the file does not list
    ("rev", ("op",), ("eve",)): False,
    ("op", ("op",), ("rev",)): False,  # the operator's key cannot sign for the reviewer
    ("rev", ("op",), None): False,  # one file, no reviewer in it
    ("rev", None, ("rev",)): False,  # a signed bag, nobody asked to check it
}


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
@pytest.mark.parametrize("case", sorted(SIGNERS, key=str), ids=lambda c: "-".join(
    [c[0], "+".join(c[1] or ["none"]), "+".join(c[2] or ["one-file"])]))
def test_recipe_and_bundle_verify_agree_with_one_signers_file_or_two(tmp_path, case):
    from harness.probe.sshsig import sign as sign_approval

    signer, allowed, reviewers = case
    bundle, keys = _approved_bundle(tmp_path)
    if signer != "rev":  # the approval re-signed by another key, the bag signed again
        root = writable_bundle(bundle, tmp_path / "x")
        [doc] = (root / "metadata" / "approvals").glob("*.json")
        doc.with_name(doc.name + ".sig").write_bytes(sign_approval(doc.read_bytes(),
                                                                   keys[signer][0]))
        retag(root, keys["op"][0])
        bundle.unlink()
        pack(root, bundle)
    for name, listed in (("allowed_signers", allowed), ("reviewers", reviewers)):
        if listed:
            (tmp_path / name).write_text("".join(keys[k][1] for k in listed))
    assert_agree(tmp_path, SIGNERS[case])


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
def test_an_unsigned_bag_with_reviewers_alone_checks_the_approvals(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    rev, rev_line = make_keys(keys, "rev", "harness-approval@v1")
    _, eve_line = make_keys(keys, "eve", "harness-approval@v1")
    export_bundle([make_approved_run(tmp_path / "src", "r1", rev)], tmp_path / "evidence.tar.gz")
    (tmp_path / "reviewers").write_text(rev_line)
    assert_agree(tmp_path, True)
    shutil.rmtree(tmp_path / "review")
    (tmp_path / "reviewers").write_text(eve_line)
    assert_agree(tmp_path, False)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
def test_a_signature_edited_in_its_armour_fails_both(tmp_path):
    """OpenSSH skips stray whitespace in the armour; the harness does not accept it, and
    neither does the recipe."""
    bundle, keys = _approved_bundle(tmp_path)
    root = writable_bundle(bundle, tmp_path / "x")
    [doc] = (root / "metadata" / "approvals").glob("*.json")
    sig = doc.with_name(doc.name + ".sig")
    lines = sig.read_text().splitlines(keepends=True)
    sig.write_text(lines[0] + lines[1].replace("\n", " \n") + "".join(lines[2:]))
    retag(root, keys["op"][0])
    bundle.unlink()
    pack(root, bundle)
    (tmp_path / "allowed_signers").write_text(keys["op"][1] + keys["rev"][1])
    assert_agree(tmp_path, False)

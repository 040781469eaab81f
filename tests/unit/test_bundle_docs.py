"""The "Verifying without the harness" recipe in docs/bundles.md really works, run exactly
as printed: no variable is set for it, it is pasted into a shell as a whole."""

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
from bundle_helpers import make_keys, make_run, pack, rebag, seal, writable_bundle

from harness.readers.bundle import export_bundle, verify_bundle

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
    from bundle_helpers import make_approved_run, retag

    from harness.judge.approval.sign import sign as sign_in
    from harness.readers.bundle import verify_tree

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

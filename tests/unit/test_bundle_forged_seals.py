"""Issue 10 item 8: a SHA256SUMS where no seal belongs never vouches for forged files.

The attack: next to a sealed run's files, plant a folder with its own SHA256SUMS listing
forged files (or such a SHA256SUMS in observations/, deeper in addenda, in a night folder,
at the top of data/). `harness verify` refuses the run; so must `bundle export` (nothing
written, exit 1), signed `bundle verify` (exit 1, naming each forged file, with a good
signature and every bag record made to agree), and the coreutils recipe in the docs.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from bundle_helpers import make_keys, make_run, pack, rebag, seal, writable_bundle
from test_bundle_docs import doc_script, run_script

from harness.cli.bundle import bundle
from harness.cli.main import cli, main
from harness.measure.runfolder.manifest import verify_folder
from harness.readers.bundle.export import ExportRefused, export_bundle
from harness.readers.bundle.verify import verify_bundle

ADDENDUM = "addenda/20261201T000000Z-refinalize"


def _sums(folder: Path, names: list[str]) -> None:
    """A SHA256SUMS in `folder` that really matches the (forged) files it lists."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (folder / name).exists():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text('{"verdict": "accepted", "forged": true}\n')
    lines = [f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n"
             for n in sorted(names)]
    (folder / "SHA256SUMS").write_text("".join(lines))


def sealed_run(parent: Path, name: str = "r") -> Path:
    """A sealed run with observations/ and one sealed addendum, as the harness leaves it."""
    run = make_run(parent, name, full=False)
    (run / "observations").mkdir()
    (run / "observations" / "trace.jsonl").write_text('{"event": "start"}\n')
    seal(run)
    addendum = run / ADDENDUM
    addendum.mkdir(parents=True)
    (addendum / "verdict.json").write_text('{"verdict": "refused"}\n')
    seal(addendum)
    return run


def _plant_file(run: Path, rel: str) -> None:
    (run / rel).parent.mkdir(parents=True, exist_ok=True)
    (run / rel).write_text("forged\n")


# Each forgery plants files into a run folder and returns what it planted (relative paths).
FORGERIES: dict[str, Callable[[Path], list[str]]] = {
    "new-folder": lambda run: (_sums(run / "X", ["verdict.json"]),
                               ["X/SHA256SUMS", "X/verdict.json"])[1],
    "observations": lambda run: (_sums(run / "observations", ["trace.jsonl", "verdict.json"]),
                                 ["observations/SHA256SUMS", "observations/verdict.json"])[1],
    "deep-in-logs": lambda run: (_sums(run / "logs/a/b", ["stdout.log"]),
                                 ["logs/a/b/SHA256SUMS", "logs/a/b/stdout.log"])[1],
    "addendum-two-deep": lambda run: (
        _sums(run / "addenda/new/b", ["verdict.json"]),
        ["addenda/new/b/SHA256SUMS", "addenda/new/b/verdict.json"])[1],
    "inside-sealed-addendum": lambda run: (
        _sums(run / ADDENDUM / "b", ["verdict.json"]),
        [f"{ADDENDUM}/b/SHA256SUMS", f"{ADDENDUM}/b/verdict.json"])[1],
    "addenda-is-a-file": lambda run: (shutil.rmtree(run / "addenda"),
                                      _plant_file(run, "addenda"), ["addenda"])[2],
}


def _named(problems) -> set[str]:
    return {p.path for p in problems}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_export_refuses_a_run_with_a_forged_seal(tmp_path, forgery):
    run = sealed_run(tmp_path / "gpu-runs")
    planted = FORGERIES[forgery](run)
    out = tmp_path / "b.tar.gz"
    with pytest.raises(ExportRefused) as e:
        export_bundle([run], out)
    assert e.value.code == 1
    assert {f"data/r/{rel}" for rel in planted} <= _named(e.value.problems), e.value.problems
    assert not out.exists()


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_export_says_what_harness_verify_says(tmp_path, forgery):
    """One owner: the problems export names in a run are `harness verify`'s, path for path."""
    run = sealed_run(tmp_path / "gpu-runs")
    FORGERIES[forgery](run)
    own = {(p.kind, f"data/r/{p.path}") for p in verify_folder(run)}
    with pytest.raises(ExportRefused) as e:
        export_bundle([run], tmp_path / "b.tar")
    assert own and {(p.kind, p.path) for p in e.value.problems} == own


@pytest.fixture(scope="module")
def signer(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("needs OpenSSH")
    tmp = tmp_path_factory.mktemp("keys")
    key, line = make_keys(tmp, "alice")
    (tmp / "allowed").write_text(line)
    return key, tmp / "allowed"


def _verify_cli(archive: Path, allowed: Path, capsys) -> tuple[int, str]:
    cli.add_command(bundle)
    with pytest.raises(SystemExit) as e:
        main(["bundle", "verify", str(archive), "--allowed-signers", str(allowed)])
    captured = capsys.readouterr()
    return e.value.code, captured.out + captured.err


def _assert_only_seal_problems(root: Path, planted: set[str]) -> None:
    """The signature is good and every bag record agrees: what fails is the forgery."""
    problems = verify_bundle(root).problems  # no --allowed-signers: the bundle is signed
    kinds = {p.kind for p in problems}
    assert "unverified-signature" in kinds
    assert not kinds & {"bad-signature", "payload-oxum", "statement", "malformed"}
    assert planted <= _named(problems), problems


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_signed_bundle_with_a_forged_seal_fails_verification(tmp_path, forgery, signer,
                                                             capsys):
    key, allowed = signer
    run = sealed_run(tmp_path / "gpu-runs")
    export_bundle([run], tmp_path / "good.tar.gz", sign_key=key)
    root = writable_bundle(tmp_path / "good.tar.gz", tmp_path / "x")
    planted = {f"data/r/{rel}" for rel in FORGERIES[forgery](root / "data/r")}
    rebag(root, key)
    _assert_only_seal_problems(root, planted)
    code, text = _verify_cli(pack(root, tmp_path / "forged.tar.gz"), allowed, capsys)
    assert code == 1, text
    assert "Traceback" not in text and "internal error" not in text
    for path in planted:
        assert f": {path}" in text, (path, text)


def _night(tmp_path: Path) -> Path:
    night = tmp_path / "night-20261130"
    sealed_run(night / "runs", "r1")
    sealed_run(night / "runs", "r2")
    (night / "summary.md").write_text("# night\n")
    return night


NIGHT_FORGERIES: dict[str, Callable[[Path], list[str]]] = {
    "night-top": lambda night: (_sums(night, ["summary.md", "forged.json"]),
                                ["SHA256SUMS"])[1],
    "night-folder": lambda night: (_sums(night / "X", ["verdict.json"]), ["X/SHA256SUMS"])[1],
    "night-run-gone": lambda night: ((night / "runs/r1/run.json").unlink(),
                                     ["runs/r1/SHA256SUMS"])[1],
}


@pytest.mark.parametrize("forgery", sorted(NIGHT_FORGERIES))
def test_export_refuses_a_seal_in_a_night_outside_its_runs(tmp_path, forgery):
    night = _night(tmp_path)
    planted = NIGHT_FORGERIES[forgery](night)
    with pytest.raises(ExportRefused) as e:
        export_bundle([night], tmp_path / "n.tar")
    assert {f"data/{night.name}/{rel}" for rel in planted} <= {
        p.path for p in e.value.problems if p.kind == "misplaced-seal"}
    assert not (tmp_path / "n.tar").exists()


@pytest.mark.parametrize("forgery", sorted(NIGHT_FORGERIES))
def test_signed_night_bundle_with_a_misplaced_seal_fails(tmp_path, forgery, signer):
    key, _ = signer
    night = _night(tmp_path)
    export_bundle([night], tmp_path / "n.tar", sign_key=key)
    root = writable_bundle(tmp_path / "n.tar", tmp_path / "x")
    planted = {f"data/{night.name}/{rel}" for rel in NIGHT_FORGERIES[forgery](
        root / "data" / night.name)}
    rebag(root, key)
    _assert_only_seal_problems(root, planted)


def test_seal_at_the_top_of_the_payload_fails(tmp_path, signer):
    """data/SHA256SUMS listing a forged folder: no run holds it, so no seal vouches."""
    key, _ = signer
    run = sealed_run(tmp_path / "gpu-runs")
    export_bundle([run], tmp_path / "b.tar", sign_key=key)
    root = writable_bundle(tmp_path / "b.tar", tmp_path / "x")
    _sums(root / "data", ["forged/verdict.json"])
    rebag(root, key)
    problems = {(p.kind, p.path) for p in verify_bundle(root).problems}
    assert ("stray", "data/SHA256SUMS") in problems
    assert ("not-a-run", "data/forged") in problems


RECIPE_CASES = [*(("run", f) for f in sorted(FORGERIES)),
                *(("night", f) for f in sorted(NIGHT_FORGERIES)), ("top", "data-top")]


@pytest.mark.parametrize("where,forgery", RECIPE_CASES)
def test_coreutils_recipe_rejects_each_forgery(tmp_path, where, forgery):
    """The reviewer without the harness is not fooled either (docs/bundles.md)."""
    folder = _night(tmp_path) if where == "night" else sealed_run(tmp_path / "gpu-runs")
    export_bundle([folder], tmp_path / "good.tar.gz")
    root = writable_bundle(tmp_path / "good.tar.gz", tmp_path / "x")
    target = root / "data" / folder.name
    if where == "run":
        FORGERIES[forgery](target)
    elif where == "night":
        NIGHT_FORGERIES[forgery](target)
    else:
        _sums(root / "data", ["forged/verdict.json"])
    rebag(root)
    pack(root, tmp_path / "evidence.tar.gz")
    result = run_script(doc_script("coreutils"), tmp_path)
    assert result.returncode != 0, result.stdout + result.stderr
    assert "bundle verified" not in result.stdout

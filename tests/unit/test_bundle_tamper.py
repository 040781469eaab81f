"""Every change to a bundle is caught: each byte of each file, added and removed files."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from bundle_helpers import make_run

from harness.cli.bundle import bundle
from harness.cli.main import cli, main
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.safe_extract import unpack
from harness.readers.bundle.verify import verify_tree

TAGMANIFEST = "tagmanifest-sha256.txt"


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    """The real entry point, so exit codes are the ones a user sees."""
    cli.add_command(bundle)
    with pytest.raises(SystemExit) as e:
        main(args)
    captured = capsys.readouterr()
    return e.value.code, captured.out + captured.err


@pytest.fixture
def tiny_bundle(tmp_path) -> Path:
    """An extracted bundle of one tiny run, writable so tests can tamper with it."""
    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    export_bundle([run], tmp_path / "b.tar")
    dest = tmp_path / "x"
    dest.mkdir()
    root = unpack(tmp_path / "b.tar", dest).root
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert verify_tree(root).ok
    return root


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_every_single_byte_flip_is_detected(tiny_bundle):
    root = tiny_bundle
    checked = 0
    for path in _files(root):
        rel = path.relative_to(root).as_posix()
        original = path.read_bytes()
        flips = [0x01, 0x20] if rel.endswith(".txt") or rel.endswith("SHA256SUMS") else [0x01]
        for offset in range(len(original)):
            for mask in flips:
                changed = bytearray(original)
                changed[offset] ^= mask
                path.write_bytes(bytes(changed))
                problems = verify_tree(root).problems
                assert problems, f"flip {mask:#x} at {rel}:{offset} went unnoticed"
                if rel != TAGMANIFEST:
                    assert rel in {p.path for p in problems}, (rel, offset, problems)
                checked += 1
        path.write_bytes(original)
    assert checked > 1000
    assert verify_tree(root).ok


@pytest.mark.parametrize("where", ["data/r/new.log", "data/new-run/run.json", "extra-tag.txt",
                                   "metadata/more.json"])
def test_added_file_is_named(tiny_bundle, where):
    (tiny_bundle / where).parent.mkdir(parents=True, exist_ok=True)
    (tiny_bundle / where).write_text("surprise\n")
    problems = verify_tree(tiny_bundle).problems
    assert ("extra", where) in {(p.kind, p.path) for p in problems}


@pytest.mark.parametrize("which", ["data/r/logs/stdout.log", "data/r/run.json", "bag-info.txt",
                                   "bagit.txt", "metadata/statement.intoto.json",
                                   "manifest-sha256.txt"])
def test_removed_file_is_named(tiny_bundle, which):
    (tiny_bundle / which).unlink()
    problems = verify_tree(tiny_bundle).problems
    assert ("missing", which) in {(p.kind, p.path) for p in problems}


def test_removed_tagmanifest_is_named(tiny_bundle):
    (tiny_bundle / TAGMANIFEST).unlink()
    problems = verify_tree(tiny_bundle).problems
    assert ("missing", TAGMANIFEST) in {(p.kind, p.path) for p in problems}


def test_consistent_rewrite_is_still_caught_by_the_run_seal(tiny_bundle):
    """Someone edits a log and fixes every bag manifest: the run's own seal still says no."""
    import hashlib

    def digest(rel: str) -> str:
        return hashlib.sha256((tiny_bundle / rel).read_bytes()).hexdigest()

    log = "data/r/logs/stdout.log"
    (tiny_bundle / log).write_text("forged\n")
    manifest = tiny_bundle / "manifest-sha256.txt"
    lines = [f"{digest(line.split('  ', 1)[1])}  {line.split('  ', 1)[1]}"
             for line in manifest.read_text().splitlines()]
    manifest.write_text("\n".join(lines) + "\n")
    problems = {(p.kind, p.path) for p in verify_tree(tiny_bundle).problems}
    assert ("changed", log) in problems  # named by the run's SHA256SUMS


def test_tampered_archive_fails_with_exit_1_naming_the_file(tiny_bundle, tmp_path, capsys):
    (tiny_bundle / "data/r/logs/stdout.log").write_text("tampered\n")
    out = tmp_path / "tampered.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(tiny_bundle, arcname=tiny_bundle.name)
    code, text = run_cli(["bundle", "verify", str(out)], capsys)
    assert code == 1
    assert "FAIL changed: data/r/logs/stdout.log" in text
    assert "verification failed" in text


def test_verify_exit_codes_for_good_bundle_and_bad_input(tmp_path, capsys):
    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    out = tmp_path / "b.tar.gz"
    code, _ = run_cli(["bundle", "export", str(run), "-o", str(out)], capsys)
    assert code == 0
    code, text = run_cli(["bundle", "verify", str(out)], capsys)
    assert code == 0 and any(t.startswith("OK ") for t in text.splitlines())  # after the run lines
    code, text = run_cli(["bundle", "verify", str(tmp_path / "absent.tar")], capsys)
    assert code == 2 and "not a file" in text
    code, text = run_cli(["bundle", "export", str(tmp_path / "nope"), "-o", str(out)], capsys)
    assert code == 2 and "Traceback" not in text

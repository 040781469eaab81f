"""Seals and manifests: sha256sum-compatible, every change named, nothing rewritten."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.measure.runfolder.manifest import parse as parse_sums
from harness.measure.runfolder.manifest import render as render_sums
from harness.measure.runfolder.manifest import verify_folder, write_manifest
from harness.measure.seal import seal_changes, seal_digest, source_seal


def make_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "run.json").write_text('{"status": "accepted"}\n')
    (run / "logs" / "stdout.log").write_bytes(b"hello\n" * 100)
    (run / "odd name with spaces.txt").write_text("x")
    return run


def test_manifest_is_sha256sum_compatible(tmp_path):
    run = make_run(tmp_path)
    write_manifest(run)
    r = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=run,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": OK") == 3


def test_manifest_is_written_once(tmp_path):
    run = make_run(tmp_path)
    write_manifest(run)
    with pytest.raises(FileExistsError):
        write_manifest(run)


def test_verify_names_changed_missing_and_extra(tmp_path):
    run = make_run(tmp_path)
    write_manifest(run)
    assert verify_folder(run) == []
    data = bytearray((run / "logs/stdout.log").read_bytes())
    data[3] ^= 0x01
    (run / "logs/stdout.log").write_bytes(bytes(data))
    (run / "run.json").unlink()
    (run / "new.txt").write_text("sneaked in")
    got = {(p.path, p.kind) for p in verify_folder(run)}
    assert got == {("logs/stdout.log", "changed"), ("run.json", "missing"),
                   ("new.txt", "extra")}


def test_addenda_have_their_own_manifest(tmp_path):
    run = make_run(tmp_path)
    write_manifest(run)
    add = run / "addenda" / "20260101T000000Z-refinalize"
    add.mkdir(parents=True)
    (add / "verdict.json").write_text("{}")
    assert sorted((p.path, p.kind) for p in verify_folder(run)) == [
        ("addenda", "extra-folder"), (str(add.relative_to(run)), "extra-folder"),
        ("addenda/20260101T000000Z-refinalize/verdict.json", "extra")]
    write_manifest(add)
    assert verify_folder(run) == []
    (add / "verdict.json").write_text('{"verdict": "accepted"}')
    assert [(p.path, p.kind) for p in verify_folder(run)] == [
        ("addenda/20260101T000000Z-refinalize/verdict.json", "changed")]


def test_no_manifest_is_a_problem_not_a_pass(tmp_path):
    run = make_run(tmp_path)
    assert [p.kind for p in verify_folder(run)] == ["no-manifest"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert [p.kind for p in verify_folder(empty)] == ["no-manifest"]


def test_sums_round_trip_and_names_needing_escapes_are_refused():
    sums = {"a b": "0" * 64, "dir/é.json": "1" * 64, "plain": "2" * 64}
    assert parse_sums(render_sums(sums).encode()) == (sorted(sums.items()), [])
    for bad in ("a\nb", "c\\d", "e\rf", "g\u2028h", "./x"):
        with pytest.raises(ValueError, match="cannot be sealed"):
            render_sums({bad: "0" * 64})


def test_seal_digest_is_order_independent_and_sensitive():
    a = {"x": "1" * 64, "y": "2" * 64}
    assert seal_digest(a) == seal_digest(dict(reversed(a.items())))
    assert seal_digest(a) != seal_digest({**a, "y": "3" * 64})
    assert seal_changes(a, {"x": "1" * 64, "z": "4" * 64}) == ["y: removed", "z: added"]


def test_source_seal_covers_harness_and_inputs(tmp_path):
    f = tmp_path / "campaigns" / "c.yaml"
    f.parent.mkdir()
    f.write_text("name: c\n")
    s1 = source_seal(tmp_path, [f])
    assert "input/campaigns/c.yaml" in s1.files
    assert "harness/measure/vector.py" in s1.files
    f.write_text("name: d\n")
    s2 = source_seal(tmp_path, [f])
    assert s1.digest != s2.digest
    assert seal_changes(s1.files, s2.files) == ["input/campaigns/c.yaml: changed"]

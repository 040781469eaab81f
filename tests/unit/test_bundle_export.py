"""`bundle export`: the bag it writes, determinism, and what it refuses to bundle."""

from __future__ import annotations

import os
import tarfile

import bagit
import pytest
from bundle_helpers import make_run, rebag, seal, writable_bundle
from click.testing import CliRunner

from harness.base.errors import InvalidInput
from harness.cli.bundle import bundle
from harness.measure.nightfolder.journal import Journal
from harness.readers.bundle.export import ExportRefused, export_bundle
from harness.readers.bundle.safe_extract import unpack
from harness.readers.bundle.verify import verify_bundle


def test_two_exports_are_byte_identical(tmp_path):
    runs = tmp_path / "gpu-runs"
    a = make_run(runs, "run-a", row=0)
    b = make_run(runs, "run-b", row=1, ended="2026-11-30T09:40:00Z")
    for suffix in ("tar", "tar.gz"):
        first = export_bundle([a, b], tmp_path / f"one.{suffix}")
        os.utime(a / "run.json", (1, 1))  # file times must not leak into the archive
        second = export_bundle([b, a], tmp_path / f"two.{suffix}")
        assert first.top == second.top
        one, two = tmp_path / f"one.{suffix}", tmp_path / f"two.{suffix}"
        assert one.read_bytes() == two.read_bytes()


def test_archive_metadata_is_fixed(tmp_path):
    run = make_run(tmp_path / "gpu-runs")
    out = tmp_path / "b.tar.gz"
    export_bundle([run], out)
    raw = out.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip mtime 0
    assert raw[3] & 0x08 == 0  # no file name stored
    with tarfile.open(out) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    top = "evidence-rehearsal-echo-20261130T083000Z-3fa2"
    assert names[0] == top and all(n == top or n.startswith(top + "/") for n in names)
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert {m.mtime for m in members} == {1796028000}  # 2026-11-30T08:40:00Z, the run's end
    assert f"{top}/data/rehearsal-echo-20261130T083000Z-3fa2/run.json" in names
    for tag in ("bagit.txt", "bag-info.txt", "manifest-sha256.txt", "tagmanifest-sha256.txt",
                "metadata/statement.intoto.json"):
        assert f"{top}/{tag}" in names


def test_bag_is_valid_for_the_bagit_library_and_payload_unchanged(tmp_path):
    run = make_run(tmp_path / "gpu-runs")
    out = tmp_path / "b.tar"
    export_bundle([run], out)
    dest = tmp_path / "x"
    dest.mkdir()
    root = unpack(out, dest).root
    assert bagit.Bag(str(root)).is_valid()
    copied = root / "data" / run.name
    for path in run.rglob("*"):
        if path.is_file():
            assert (copied / path.relative_to(run)).read_bytes() == path.read_bytes()
    info = (root / "bag-info.txt").read_text()
    assert "Campaign: kv-warmup" in info and "Host: gfx1100-box" in info
    assert verify_bundle(out).ok


def test_night_folder_keeps_its_structure(tmp_path):
    night = tmp_path / "night-20261130"
    make_run(night / "runs", "r1")
    make_run(night / "runs", "r2", row=1)
    (night / "summary.json").write_text("{}")
    out = tmp_path / "n.tar.gz"
    result = export_bundle([night], out)
    assert sorted(result.runs) == ["r1", "r2"]
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert f"{result.top}/data/night-20261130/runs/r2/SHA256SUMS" in names
    assert f"{result.top}/data/night-20261130/summary.json" in names
    report = verify_bundle(out)
    assert report.ok and report.runs == ["data/night-20261130/runs/r1",
                                         "data/night-20261130/runs/r2"]


def test_night_folder_as_harness_night_writes_it_with_its_runs_beside(tmp_path):
    """`harness night` keeps the journal and summaries in RUNS/nights/<night>/ and the runs
    in RUNS/: the night is bundled with the runs its journal names (test_bundle_night.py)."""
    night = tmp_path / "nights" / "kv-20261130T080000Z"
    night.mkdir(parents=True)
    run = make_run(tmp_path, "r1", full=False)
    with Journal.create(night / "journal.sqlite", campaign="kv", campaign_file="kv.yaml",
                        plan=[("c", 0)]) as j:
        j.finish(j.mark_running(j.rows()[0], "r1", str(run)), "accepted")
    for name in ("ended.json", "summary.md", "summary.html", "summary.json"):
        (night / name).write_text(f"{name}\n")
    out = tmp_path / "n.tar"
    result = export_bundle([night], out)
    assert result.runs == ["r1"]
    report = verify_bundle(out)
    assert report.ok, report.problems
    assert report.runs == ["data/r1"]
    (night / "journal.sqlite").unlink()
    with pytest.raises(InvalidInput) as e:
        export_bundle([night, run], tmp_path / "m.tar")
    assert any("not a run or night folder" in f for f in e.value.faults)


def test_absent_records_are_tolerated(tmp_path):
    run = make_run(tmp_path, "tiny", full=False)
    out = tmp_path / "t.tar"
    export_bundle([run], out)
    assert verify_bundle(out).ok


def test_run_broken_before_export_is_refused_naming_each_file(tmp_path):
    run = make_run(tmp_path / "gpu-runs")
    (run / "logs" / "stdout.log").write_text("rewritten after sealing\n")
    (run / "late.txt").write_text("added after sealing\n")
    out = tmp_path / "b.tar"
    with pytest.raises(ExportRefused) as e:
        export_bundle([run], out)
    assert e.value.code == 1
    assert {(p.kind, p.path) for p in e.value.problems} == {
        ("changed", f"data/{run.name}/logs/stdout.log"), ("extra", f"data/{run.name}/late.txt")}
    assert not out.exists()


def test_broken_run_in_a_bundle_fails_verification(tmp_path):
    """A run broken inside the bag, with every bag record made to agree: its seal says no."""
    run = make_run(tmp_path / "gpu-runs")
    export_bundle([run], tmp_path / "b.tar")
    root = writable_bundle(tmp_path / "b.tar", tmp_path / "x")
    (root / f"data/{run.name}/logs/stdout.log").write_text("rewritten\n")
    (root / f"data/{run.name}/late.txt").write_text("added\n")
    rebag(root)
    problems = {(p.kind, p.path) for p in verify_bundle(root).problems}
    assert problems == {("changed", f"data/{run.name}/logs/stdout.log"),
                        ("extra", f"data/{run.name}/late.txt")}


def test_unsealed_run_is_refused_and_fails_verification(tmp_path):
    run = make_run(tmp_path, "r", full=False)
    export_bundle([run], tmp_path / "b.tar")
    root = writable_bundle(tmp_path / "b.tar", tmp_path / "x")
    (run / "SHA256SUMS").unlink()
    with pytest.raises(ExportRefused) as e:
        export_bundle([run], tmp_path / "c.tar")
    assert [(p.kind, p.path) for p in e.value.problems] == [("unsealed", "data/r")]
    (root / "data/r/SHA256SUMS").unlink()
    rebag(root)
    assert [(p.kind, p.path) for p in verify_bundle(root).problems] == [("unsealed", "data/r")]


def test_cli_export_of_a_broken_run_exits_1_naming_the_file(tmp_path, capsys):
    from harness.cli.main import cli, main

    cli.add_command(bundle)
    run = make_run(tmp_path, "r", full=False)
    (run / "logs" / "stdout.log").write_text("rewritten\n")
    with pytest.raises(SystemExit) as e:
        main(["bundle", "export", str(run), "-o", str(tmp_path / "b.tar")])
    err = capsys.readouterr().err
    assert e.value.code == 1
    assert "FAIL changed: data/r/logs/stdout.log" in err and "not bundled" in err
    assert "Traceback" not in err and not (tmp_path / "b.tar").exists()


def test_addendum_with_its_own_seal_is_fine(tmp_path):
    run = make_run(tmp_path, "r", full=False)
    addendum = run / "addenda" / "20261201T000000Z-refinalize"
    addendum.mkdir(parents=True)
    (addendum / "verdict.json").write_text('{"verdict": "refused"}')
    seal(addendum)
    out = tmp_path / "b.tar"
    export_bundle([run], out)
    assert verify_bundle(out).ok


@pytest.mark.parametrize("breakage", ["symlink", "fifo", "not-a-run", "missing", "twice"])
def test_refuses_what_a_bag_cannot_hold(tmp_path, breakage):
    run = make_run(tmp_path / "gpu-runs")
    folders = [run]
    if breakage == "symlink":
        (run / "link").symlink_to("/etc/hostname")
    elif breakage == "fifo":
        os.mkfifo(run / "pipe")
    elif breakage == "not-a-run":
        (tmp_path / "empty").mkdir()
        folders = [tmp_path / "empty"]
    elif breakage == "missing":
        folders = [tmp_path / "nowhere"]
    else:
        folders = [run, run / "logs"]
    with pytest.raises(InvalidInput) as e:
        export_bundle(folders, tmp_path / "b.tar")
    assert e.value.faults
    assert not (tmp_path / "b.tar").exists()


def test_never_overwrites_and_rejects_odd_names(tmp_path):
    run = make_run(tmp_path / "gpu-runs")
    (tmp_path / "b.tar").write_text("keep me")
    with pytest.raises(InvalidInput, match="exists"):
        export_bundle([run], tmp_path / "b.tar")
    assert (tmp_path / "b.tar").read_text() == "keep me"
    with pytest.raises(InvalidInput, match=r"\.tar"):
        export_bundle([run], tmp_path / "b.zip")
    with pytest.raises(InvalidInput, match="inside"):
        export_bundle([run], run / "b.tar")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cli_export_then_verify(tmp_path):
    run = make_run(tmp_path / "gpu-runs")
    out = tmp_path / "b.tar.gz"
    runner = CliRunner()
    result = runner.invoke(bundle, ["export", str(run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 run(s)" in result.output
    result = runner.invoke(bundle, ["verify", str(out)])
    assert result.exit_code == 0 and "\nOK " in result.output  # the run lines come first

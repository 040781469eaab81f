"""`bundle export NIGHT_DIR` on the layout `harness night` writes: RUNS/nights/<night>/ with
the journal, and each run folder beside the nights at RUNS/<run-id>/ (reruns included).
The journal's paths are hostile: only RUNS/<run-id> folders are ever bundled."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest
from bundle_helpers import make_run

from harness.base.errors import InvalidInput
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.rows import Row
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.nightruns import journal_runs, left_out
from harness.readers.bundle.verify import verify_bundle

STAMP = "20261130T080000Z"


def night_with(runs: Path, rows: list[tuple[str, str | None, str | None]]) -> Path:
    """A real night journal in RUNS/nights/: one plan slot per (state, run_id, run_dir);
    run_dir None means RUNS/<run_id>."""
    night = runs / "nights" / f"kv-{STAMP}"
    night.mkdir(parents=True)
    plan = [(f"c{i}", 0) for i in range(len(rows))]
    with Journal.create(night / "journal.sqlite", campaign="kv", campaign_file="kv.yaml",
                        plan=plan) as j:
        for row, (state, run_id, run_dir) in zip(j.rows(), rows, strict=True):
            if run_id is None:
                continue
            row = j.mark_running(row, run_id, run_dir or str(runs / run_id))
            j.finish(row, state, "why")
    (night / "summary.md").write_text("# night\n")
    return night


def add_rerun(night: Path, runs: Path, original: str, new: str) -> None:
    with Journal.open(night / "journal.sqlite") as j:
        row = j.add_rerun(original, "reseated the card")
        row = j.mark_running(row, new, str(runs / new))
        j.finish(row, "accepted")


def names(out: Path) -> list[str]:
    with tarfile.open(out) as tar:
        return tar.getnames()


def test_a_night_brings_its_runs_and_reruns_and_verifies(tmp_path):
    runs = tmp_path / "gpu-runs"
    for i, rid in enumerate(("r-a", "r-b", "r-b2")):
        make_run(runs, rid, row=i)
    make_run(runs, "not-of-this-night")
    night = night_with(runs, [("accepted", "r-a", None), ("refused", "r-b", None)])
    add_rerun(night, runs, "r-b", "r-b2")
    out = tmp_path / "n.tar"
    result = export_bundle([night], out)
    assert result.runs == ["r-a", "r-b", "r-b2"]
    assert result.top == f"evidence-kv-{STAMP}"  # named from the night, as before
    listed = names(out)
    assert f"{result.top}/data/nights/kv-{STAMP}/journal.sqlite" in listed  # as in RUNS
    assert f"{result.top}/data/r-b2/SHA256SUMS" in listed
    assert not any("not-of-this-night" in n for n in listed)
    report = verify_bundle(out)
    assert report.ok, report.problems
    assert report.runs == ["data/r-a", "data/r-b", "data/r-b2"]


def test_night_export_is_deterministic_and_never_writes_into_the_night(tmp_path):
    runs = tmp_path / "gpu-runs"
    make_run(runs, "r-a")
    night = night_with(runs, [("accepted", "r-a", None)])
    before = sorted(os.listdir(night))
    export_bundle([night], tmp_path / "one.tar")
    assert sorted(os.listdir(night)) == before
    # a reader of the journal leaves SQLite's -shm/-wal behind: not evidence, not bundled
    with Journal.open(night / "journal.sqlite", readonly=True) as j:
        j.rows()
    (night / "journal.sqlite-shm").write_bytes(b"\1" * 64)
    (night / "journal.sqlite-wal").write_bytes(b"")
    export_bundle([night], tmp_path / "two.tar")
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()


def test_runs_given_as_well_are_bundled_once(tmp_path):
    runs = tmp_path / "gpu-runs"
    a = make_run(runs, "r-a")
    night = night_with(runs, [("accepted", "r-a", None)])
    result = export_bundle([night, a], tmp_path / "n.tar")
    assert result.runs == ["r-a"]
    assert verify_bundle(tmp_path / "n.tar").ok


def test_a_run_elsewhere_must_be_named_to_be_bundled(tmp_path):
    runs = tmp_path / "gpu-runs"
    make_run(runs, "r-a")
    other = make_run(tmp_path / "elsewhere", "r-x")  # `rerun --runs-dir elsewhere`
    night = night_with(runs, [("accepted", "r-a", None), ("accepted", "r-x", str(other))])
    with pytest.raises(InvalidInput) as e:
        export_bundle([night], tmp_path / "n.tar")
    assert any("r-x" in f and "give its folder as well" in f for f in e.value.faults)
    result = export_bundle([night, other], tmp_path / "n.tar")
    assert result.runs == ["r-a", "r-x"]


def test_forged_rows_never_reach_outside_the_runs_folder(tmp_path):
    runs = tmp_path / "gpu-runs"
    make_run(runs, "r-a")
    secret = make_run(tmp_path / "private", "secret-run")
    # the row's path points outside; the folder of that name beside the night is absent
    night = night_with(runs, [("accepted", "secret-run", str(secret))])
    with pytest.raises(InvalidInput) as e:
        export_bundle([night], tmp_path / "n.tar")
    assert any("secret-run" in f for f in e.value.faults)
    assert not (tmp_path / "n.tar").exists()


def test_a_symlinked_run_folder_is_refused(tmp_path):
    runs = tmp_path / "gpu-runs"
    target = make_run(tmp_path / "private", "r-a")
    runs.mkdir()
    (runs / "r-a").symlink_to(target)
    night = night_with(runs, [("accepted", "r-a", None)])
    with pytest.raises(InvalidInput) as e:
        export_bundle([night], tmp_path / "n.tar")
    assert any("not a real folder" in f for f in e.value.faults)


def test_a_run_cut_off_before_its_folder_existed_is_not_required(tmp_path):
    runs = tmp_path / "gpu-runs"
    make_run(runs, "r-a")
    night = night_with(runs, [("accepted", "r-a", None), ("interrupted", "r-gone", None)])
    assert export_bundle([night], tmp_path / "n.tar").runs == ["r-a"]
    gone = night_with(tmp_path / "other", [("refused", "r-missing", None)])
    with pytest.raises(InvalidInput) as e:
        export_bundle([gone], tmp_path / "m.tar")
    assert any("r-missing" in f and "is not there" in f for f in e.value.faults)


def test_a_damaged_journal_is_bad_input(tmp_path):
    night = tmp_path / "gpu-runs" / "nights" / f"kv-{STAMP}"
    night.mkdir(parents=True)
    (night / "journal.sqlite").write_text("not sqlite\n")
    with pytest.raises(InvalidInput) as e:
        export_bundle([night], tmp_path / "n.tar")
    assert any("journal" in f for f in e.value.faults)


def row(i: int, run_id: str | None, run_dir: str | None, state: str = "accepted") -> Row:
    return Row(id=i, plan_index=i, control="c", repeat_index=0, attempt=1, state=state,
               run_id=run_id, run_dir=run_dir, reason=None, rerun_of=None, origin="plan",
               link_reason=None, updated="2026-11-30T08:00:00Z")


@pytest.mark.parametrize("run_id, run_dir", [
    ("..", "/r/.."), ("a/b", "/r/a/b"), ("", "/r/x"), ("x", None), ("x", "/r/y"),
    ("bad\nname", "/r/bad\nname"),
])
def test_journal_runs_refuses_forged_rows(run_id, run_dir):
    runs, faults = journal_runs([row(1, run_id, run_dir)], "j")
    assert runs == [] and len(faults) == 1


def test_journal_runs_keeps_good_rows_and_refuses_a_repeated_run():
    runs, faults = journal_runs([row(1, "a", "/r/a"), row(2, None, None, "planned")], "j")
    assert [r.run_id for r in runs] == ["a"] and faults == []
    runs, faults = journal_runs([row(1, "a", "/r/a"), row(2, "a", "/r/a")], "j")
    assert len(faults) == 1 and "more than one row" in faults[0]


def test_only_the_journals_side_files_are_left_out():
    assert left_out("journal.sqlite-shm", 32768)
    assert left_out("journal.sqlite-wal", 0)
    assert not left_out("journal.sqlite-wal", 4096)  # committed rows may live there
    assert not left_out("journal.sqlite", 0)
    assert not left_out("summary.md", 0)

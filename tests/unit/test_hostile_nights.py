"""Nights and runs found by name in a runs folder others may write: a symlinked night
folder, a symlinked journal or a FIFO beside it, an oversized journal, a summary whose
run folders point out of the runs folder, a folder named to shadow a run id. Each read
stays in the runs folder, ends, and says why with exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from bundle_helpers import make_run

from harness.base.errors import InvalidInput
from harness.measure.nightfolder import schema
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import latest_night, night_folders, run_beside
from harness.readers import statuslines
from harness.readers.report.morning import write_night_summary
from tests.inprocess import invoke

RUN_A = "echo-20261130T080100Z-0a0a0a0a"
RUN_B = "echo-20261201T080100Z-0b0b0b0b"
ELSEWHERE_RUN = "echo-20261201T090000Z-0e0e0e0e"
OLD, NEW = "kv-20261130T080000Z", "kv-20261201T080000Z"
EVIL = "evil-29991231T000000Z"  # newer than any real night


def _night(runs: Path, name: str, run_id: str) -> Path:
    night = runs / "nights" / name
    night.mkdir(parents=True)
    with Journal.create(night / "journal.sqlite", campaign=name.rsplit("-", 1)[0],
                        campaign_file="kv.yaml", plan=[("echo", 0)]) as j:
        j.finish(j.mark_running(j.rows()[0], run_id, str(runs / run_id)), "accepted")
    return night


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runs dir with two summarised nights of one run each, and outside it a night and a
    run of another user's."""
    runs = tmp_path / "gpu-runs"
    for rid in (RUN_A, RUN_B):
        make_run(runs, rid)
    write_night_summary(_night(runs, OLD, RUN_A))
    write_night_summary(_night(runs, NEW, RUN_B))
    _night(tmp_path / "elsewhere", EVIL, RUN_B)
    make_run(tmp_path / "elsewhere", ELSEWHERE_RUN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_RUNS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(statuslines, "containers", lambda: ([], None))  # no Docker asked
    monkeypatch.setattr(statuslines, "list_timers", lambda: ([], None))  # nor systemd
    return runs


# -- night folders by listing: real folders only ---------------------------------------------

def test_a_symlinked_night_folder_is_never_the_latest_night(runs: Path) -> None:
    evil = runs.parent / "elsewhere" / "nights" / EVIL
    (runs / "nights" / EVIL).symlink_to(evil, target_is_directory=True)
    (runs / "nights" / "kv-29991231T000000Z").symlink_to(evil, target_is_directory=True)
    assert latest_night(runs / "nights") == runs / "nights" / NEW
    assert [p.name for p in night_folders(runs / "nights", "kv")] == [OLD, NEW]
    code, out = invoke("status", "--runs-dir", str(runs))
    assert code == 0, out
    assert "evil" not in out and "29991231" not in out
    assert f"night {runs / 'nights' / NEW} (kv," in out


def test_a_night_folder_that_is_a_file_is_no_night(runs: Path) -> None:
    (runs / "nights" / "kv-29991231T000000Z").write_text("not a folder")
    assert latest_night(runs / "nights") == runs / "nights" / NEW
    code, out = invoke("diff", "kv-2999", NEW, "--runs-dir", str(runs))
    assert code == 2 and "Traceback" not in out


# -- the journal: a regular file of its own, bounded -------------------------------------------

def test_a_symlinked_journal_is_refused_where_it_is_read(runs: Path) -> None:
    journal = runs / "nights" / NEW / "journal.sqlite"
    journal.unlink()
    journal.symlink_to(runs.parent / "elsewhere" / "nights" / EVIL / "journal.sqlite")
    with pytest.raises(InvalidInput, match="journal is a symlink"):
        Journal.open(journal, readonly=True)
    with pytest.raises(InvalidInput, match="journal is a symlink"):
        Journal.open(journal)  # a resume would write through it
    code, out = invoke("status", "--runs-dir", str(runs))
    assert code == 0 and "evil" not in out
    assert "night journal is a symlink" in out


@pytest.mark.parametrize("side", ["-journal", "-wal", "-shm"])
def test_a_fifo_beside_the_journal_is_refused_not_waited_on(runs: Path, side: str) -> None:
    journal = runs / "nights" / NEW / "journal.sqlite"
    fifo = Path(f"{journal}{side}")
    fifo.unlink(missing_ok=True)  # an empty WAL a reader left
    os.mkfifo(fifo)
    got: list[BaseException | None] = []

    def read() -> None:
        try:
            Journal.open(journal, readonly=True).close()
            got.append(None)
        except BaseException as e:  # handed to the test's thread
            got.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(20)
    if reader.is_alive():  # SQLite waits on the FIFO: let it go, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"reading the journal waited on the FIFO {side}")
    assert isinstance(got[0], InvalidInput) and "not a regular file" in got[0].message


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_journal_that_is_a_device_or_fifo_is_no_journal(runs: Path, target: str) -> None:
    journal = runs / "nights" / NEW / "journal.sqlite"
    journal.unlink()
    if target == "fifo":
        os.mkfifo(journal)
    else:
        journal.symlink_to(target)
    with pytest.raises(InvalidInput):
        Journal.open(journal, readonly=True)
    code, out = invoke("ls", "--nights", "--runs-dir", str(runs))
    assert code == 0 and NEW in out


def test_an_oversized_journal_is_refused_before_sqlite_reads_it(
        runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = runs / "nights" / NEW / "journal.sqlite"
    monkeypatch.setattr(schema, "MAX_JOURNAL_BYTES", journal.stat().st_size - 1)
    with pytest.raises(InvalidInput, match=r"over the \d+ byte limit"):
        Journal.open(journal, readonly=True)
    code, out = invoke("report", NEW, "--runs-dir", str(runs))
    assert code == 2 and "byte limit" in out and "Traceback" not in out


def test_a_journal_of_a_newer_schema_is_exit_2_with_the_versions(runs: Path) -> None:
    conn = sqlite3.connect(runs / "nights" / NEW / "journal.sqlite")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    code, out = invoke("report", NEW, "--runs-dir", str(runs))
    assert code == 2 and "schema version 99" in out


def test_a_dangling_link_is_never_created_through(tmp_path: Path) -> None:
    target = tmp_path / "outside.sqlite"
    (tmp_path / "journal.sqlite").symlink_to(target)
    with pytest.raises(InvalidInput, match="journal is a symlink"):
        Journal.open_or_create(tmp_path / "journal.sqlite", campaign="kv",
                               campaign_file="kv.yaml", plan=[("echo", 0)])
    with pytest.raises(InvalidInput, match="never overwritten"):
        Journal.create(tmp_path / "journal.sqlite", campaign="kv", campaign_file="kv.yaml",
                       plan=[("echo", 0)])
    assert not target.exists()


# -- run folders a night names: by name, beside the night ---------------------------------------

def _summary_names(night: Path, run_dir: str) -> None:
    doc = json.loads((night / "summary.json").read_text())
    for entry in doc["runs"]:
        entry["run_dir"] = entry["path"] = run_dir
    (night / "summary.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("written", [
    "{outside}/" + ELSEWHERE_RUN,  # absolute, out of the runs folder
    "../../../elsewhere/" + ELSEWHERE_RUN,  # relative, climbing out
])
def test_diff_of_nights_never_reads_a_run_out_of_the_runs_folder(runs: Path,
                                                                 written: str) -> None:
    _summary_names(runs / "nights" / NEW, written.format(outside=runs.parent / "elsewhere"))
    code, out = invoke("diff", OLD, NEW, "--runs-dir", str(runs), "--json")
    doc = json.loads(out)
    assert doc["controls"]["echo"]["error"].startswith("run folder not found beside its night")
    assert code == 1


def test_diff_of_a_copied_night_finds_its_runs_by_name(runs: Path) -> None:
    _summary_names(runs / "nights" / NEW, f"/srv/another/machine/gpu-runs/{RUN_B}")
    code, out = invoke("diff", OLD, NEW, "--runs-dir", str(runs), "--json")
    assert code == 0, out
    assert json.loads(out)["controls"]["echo"]["error"] is None


def test_run_beside_takes_real_run_folders_by_name_only(runs: Path) -> None:
    night = runs / "nights" / NEW
    (runs / "echo-20261201T090000Z-0f0f0f0f").symlink_to(runs / RUN_A)
    assert run_beside(night, f"../x/{RUN_B}/") == runs / RUN_B
    for hostile in ("..", "../..", "/etc", "", "echo-20261201T090000Z-0f0f0f0f", "a\0b"):
        assert run_beside(night, hostile) is None


# -- names: the whole id names one thing ------------------------------------------------------

def test_a_night_named_to_begin_with_a_run_id_cannot_shadow_the_run(runs: Path) -> None:
    _night(runs, f"{RUN_A}-20261202T000000Z", RUN_A)
    code, out = invoke("diff", RUN_A, RUN_B, "--runs-dir", str(runs), "--json")
    assert code == 0, out
    assert json.loads(out)["a"]["dir"].endswith(RUN_A)

"""Red team: `rerun --failed` over a forged night journal, and the rerun index as a planted
link or FIFO. Each attack must be refused with exit 2 before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.errors import InvalidInput
from harness.night.journal import JOURNAL_NAME, Journal
from harness.rerun import INDEX, append_index, night_failures

PLAN = [("echo", 0), ("sleep", 0)]


def _night(tmp_path: Path, dirs: list[tuple[str, str]]) -> Path:
    """A night folder RUNS/nights/N whose slots all refused, at the given (run_id, run_dir)."""
    night = tmp_path / "runs" / "nights" / "n1"
    night.mkdir(parents=True)
    j = Journal.create(night / JOURNAL_NAME, campaign="c", campaign_file="c.yaml",
                       plan=PLAN[:len(dirs)], seal="sha256:" + "a" * 64,
                       deadline="2026-12-01T06:00:00Z")
    for row, (run_id, run_dir) in zip(j.rows(), dirs, strict=True):
        j.mark_refused(j.mark_running(row, run_id, run_dir), "refused")
    j.close()
    return night


def test_failed_rows_inside_the_runs_folder_are_rerun(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    night = _night(tmp_path, [("r1", str(runs / "r1")), ("r2", str(runs / "r2"))])
    assert night_failures(night) == [Path(os.path.realpath(runs / "r1")),
                                     Path(os.path.realpath(runs / "r2"))]


@pytest.mark.parametrize("where", ["/tmp/evil/r1", "../elsewhere/r1", "{runs}/sub/r1",
                                   "{runs}/nights/r1", "{runs}/other-id"])
def test_forged_row_naming_a_folder_outside_the_runs_folder_is_refused(
        tmp_path: Path, where: str) -> None:
    night = _night(tmp_path, [("r1", where.format(runs=tmp_path / "runs"))])
    with pytest.raises(InvalidInput, match="not a folder named for it in"):
        night_failures(night)


def test_forged_row_escaping_through_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside" / "r1").mkdir(parents=True)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r1").symlink_to(tmp_path / "outside" / "r1")
    night = _night(tmp_path, [("r1", str(tmp_path / "runs" / "r1"))])
    with pytest.raises(InvalidInput, match="not a folder named for it in"):
        night_failures(night)


def test_forged_journal_naming_one_run_folder_twice_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    night = _night(tmp_path, [("r1", str(runs / "r1")), ("r1b", str(runs / "r1"))])
    with pytest.raises(InvalidInput):  # r1b's folder is not named for it: refused either way
        night_failures(night)


def test_escape_characters_in_a_forged_row_are_escaped_in_the_message(tmp_path: Path) -> None:
    night = _night(tmp_path, [("r1", "/tmp/\x1b]0;owned\x07\n\u202eevil")])
    with pytest.raises(InvalidInput) as e:
        night_failures(night)
    assert not any(c in e.value.message for c in "\x1b\x07\n\u202e")


def test_rerun_index_planted_as_a_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (tmp_path / INDEX).symlink_to(victim)
    with pytest.raises(InvalidInput, match="rerun index"):
        append_index(tmp_path, {"x": 1})
    assert victim.read_text() == "keep\n"


def test_rerun_index_planted_as_a_fifo_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / INDEX)
    with pytest.raises(InvalidInput, match="rerun index"):
        append_index(tmp_path, {"x": 1})


def test_rerun_index_appends_one_line_per_entry(tmp_path: Path) -> None:
    append_index(tmp_path, {"x": 1})
    append_index(tmp_path, {"x": 2})
    assert (tmp_path / INDEX).read_text() == '{"x": 1}\n{"x": 2}\n'


def test_rerun_failed_over_a_forged_journal_exits_2_and_writes_nothing(
        tmp_path: Path, capsys) -> None:
    from harness.cli.main import main

    outside = tmp_path / "outside"
    (outside / "r1").mkdir(parents=True)
    night = _night(tmp_path, [("r1", str(outside / "r1"))])
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as e:
        main(["rerun", "--failed", str(night), "--reason", "forged"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "not a folder named for it in" in err
    assert "Traceback" not in err
    assert sorted(p for p in tmp_path.rglob("*") if "journal" not in p.name) == sorted(
        p for p in before if "journal" not in p.name)


@pytest.mark.parametrize("reason", ["\udcff", "fixed \udc80 it", "   "])
def test_a_reason_utf8_cannot_hold_is_refused_before_anything_runs(
        tmp_path: Path, reason: str, capsys) -> None:
    """A non-UTF-8 argv byte arrives as a lone surrogate; it would fail the run.json,
    journal and reruns.jsonl writes half-way through a rerun."""
    from harness.cli.main import main

    (tmp_path / "r1").mkdir()
    with pytest.raises(SystemExit) as e:
        main(["rerun", str(tmp_path / "r1"), "--reason", reason])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--reason" in err and "Traceback" not in err
    assert sorted(tmp_path.rglob("*")) == [tmp_path / "r1"]


def test_check_reason_names_the_byte() -> None:
    from harness.rerun import check_reason

    with pytest.raises(InvalidInput, match=r"byte '\\udcff' at character 6"):
        check_reason("fixed \udcff")
    check_reason("fixed the control \u00e9")


@pytest.mark.parametrize("campaign", ["/dev/zero", "{tmp}/fifo.yaml", "/etc",
                                      "{tmp}/missing.yaml"])
def test_a_hostile_recorded_campaign_path_is_bad_input(tmp_path: Path, campaign: str,
                                                       capsys) -> None:
    """The original's run.json names its campaign file; a forged one may name a device, a
    FIFO (which a naive open would block on) or a folder: exit 2, nothing written."""
    import json

    from harness.cli.main import main
    from harness.runfolder import record

    os.mkfifo(tmp_path / "fifo.yaml")
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "schema": record.SCHEMA, "run_id": "r1", "attempt": 1, "status": "refused",
        "reasons": [], "rules": [], "seal": "sha256:s", "image": {}, "model_hashes": {},
        "campaign": {"file": campaign.format(tmp=tmp_path), "name": "c"},
        "control": {"name": "echo"}}))
    (run / "SHA256SUMS").write_text("")
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as e:
        main(["rerun", str(run), "--reason", "again"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    assert "campaign" in err or "missing.yaml" in err, err  # refused for the path, not the record
    assert sorted(tmp_path.rglob("*")) == before

"""Red team: `rerun --failed` over a forged night journal, and the rerun index as a planted
link or FIFO. Each attack must be refused with exit 2 before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.driver.rerun import append_index, night_failures
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.runfolder.reruns import INDEX

PLAN = [("echo", 0), ("sleep", 0)]


def _night(tmp_path: Path, dirs: list[tuple[str, str]]) -> Path:
    """A night folder RUNS/nights/N whose slots all refused, at the given (run_id, run_dir)."""
    night = tmp_path / "runs" / "nights" / "n1"
    night.mkdir(parents=True)
    j = Journal.create(night / JOURNAL_NAME, campaign="c", campaign_file="c.yaml",
                       plan=PLAN[:len(dirs)], seal="sha256:" + "a" * 64,
                       deadline="2026-12-01T06:00:00Z")
    for row, (run_id, run_dir) in zip(j.rows(), dirs, strict=True):
        j.finish(j.mark_running(row, run_id, run_dir), "refused", "refused")
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
    from harness.driver.rerun import check_reason

    with pytest.raises(InvalidInput, match=r"byte '\\udcff' at character 6"):
        check_reason("fixed \udcff")
    check_reason("fixed the control \u00e9")


def _original(tmp_path: Path, campaign_file: str) -> Path:
    """A sealed, intact original under tmp_path/runs whose record names `campaign_file`."""
    import json

    from harness.measure.runfolder.manifest import write_manifest
    from harness.measure.runfolder.runjson import RunRecord

    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps(RunRecord(
        run_id="r1", status="refused", attempt=1, seal="sha256:s",
        campaign={"file": campaign_file, "name": "c"}, control={"name": "echo"}).as_dict()))
    write_manifest(run)
    return run


def _rerun(argv: list[str], capsys) -> tuple[int, str]:
    from harness.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["rerun", *argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return e.value.code, err


@pytest.mark.parametrize(("campaign", "why"), [
    ("/dev/zero", "outside the checkout"),
    ("/etc", "outside the checkout"),
    ("{tmp}/zero.yaml", "outside the checkout"),  # a link in the checkout to /dev/zero
    ("{tmp}/fifo.yaml", "fifo.yaml:1:1: the YAML file is a FIFO, not a regular file"),
    ("{tmp}/folder.yaml", "folder.yaml:1:1: the YAML file is a folder, not a regular file"),
    ("{tmp}/missing.yaml", "missing.yaml: no such campaign file"),
])
def test_a_hostile_recorded_campaign_path_is_bad_input(tmp_path: Path, campaign: str,
                                                       why: str, capsys,
                                                       monkeypatch) -> None:
    """The original's run.json names its campaign file; a forged one (sealed, so the
    record is read) may name a device, a FIFO (which a naive open would block on) or a
    folder: exit 2, nothing written. Outside the checkout it is refused for where it is;
    inside, the campaign loader refuses it for what it is."""
    monkeypatch.chdir(tmp_path)  # the checkout: tmp_path (no git work tree holds it)
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "folder.yaml").mkdir()
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    run = _original(tmp_path, campaign.format(tmp=tmp_path))
    before = sorted(tmp_path.rglob("*"))
    code, err = _rerun([str(run), "--reason", "again"], capsys)
    assert code == 2 and why in err, err  # refused for the path, not the record
    if why != "outside the checkout":
        assert "outside the checkout" not in err and "campaign" in err, err
    assert sorted(tmp_path.rglob("*")) == before


def _project(root: Path, control: str) -> Path:
    """A valid campaign (with one control) in root/campaigns."""
    (root / "controls").mkdir(parents=True)
    (root / "campaigns").mkdir()
    (root / "images.lock").write_text("images:\n  rehearsal:\n    id: sha256:" + "a" * 64
                                      + "\n")
    (root / "controls" / f"{control}.yaml").write_text(
        f"name: {control}\nimage: rehearsal\ndevice: cpu\ncommand: [\"true\"]\n")
    camp = root / "campaigns" / "c.yaml"
    camp.write_text(f"name: c\nrow: R\ncontrols: [{control}]\n")
    return camp


def test_a_sealed_record_naming_a_campaign_outside_the_checkout_is_bad_input(
        tmp_path: Path, capsys, monkeypatch) -> None:
    """A sealed, intact record naming a valid campaign outside the checkout: exit 2, nothing
    written; with --campaign the operator's own file is the one read, never the record's."""
    from harness.driver.rerun import plan_rerun

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".git").mkdir()
    monkeypatch.chdir(checkout)
    elsewhere = _project(tmp_path / "elsewhere", "echo")
    run = _original(checkout, str(elsewhere))
    before = sorted(tmp_path.rglob("*"))
    code, err = _rerun([str(run), "--reason", "again"], capsys)
    assert code == 2 and "outside the checkout" in err and str(elsewhere) in err, err
    assert sorted(tmp_path.rglob("*")) == before

    own = _project(checkout / "mine", "echo")
    plan = plan_rerun(run, campaign=own)
    assert plan.loaded.campaign_file == own and plan.control == "echo"
    other = _project(checkout / "other", "sleep")  # the operator's file, without the control
    code, err = _rerun([str(run), "--reason", "again", "--campaign", str(other)], capsys)
    assert code == 2 and f"campaign {other} no longer has control 'echo'" in err, err
    assert "outside the checkout" not in err
    assert sorted(p for p in tmp_path.rglob("*") if "mine" not in p.parts
                  and "other" not in p.parts) == before


def test_a_recorded_campaign_in_the_runs_checkout_reruns_from_any_folder(
        tmp_path: Path, monkeypatch) -> None:
    """The checkout is the git work tree holding the run's runs folder, not the current
    folder's: a run of ops/ names ops/'s campaign, and plans the same from elsewhere."""
    from harness.driver.rerun import plan_rerun

    ops = tmp_path / "ops"
    (ops / ".git").mkdir(parents=True)
    camp = _project(ops, "echo")
    run = _original(ops, str(camp))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".git").mkdir(parents=True)  # another checkout: it has no say
    monkeypatch.chdir(elsewhere)
    plan = plan_rerun(run)
    assert plan.loaded.campaign_file == camp and plan.control == "echo"
    assert list(elsewhere.iterdir()) == [elsewhere / ".git"]


def test_a_forged_run_cannot_bring_its_own_checkout(tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    """A run folder laid out by the record's author: outside git it is no checkout (the
    current folder's decides); a link in the operator's runs folder is taken as addressed,
    so a git work tree it leads to is not the checkout either. Exit 2, nothing written."""
    ops = tmp_path / "ops"
    (ops / ".git").mkdir(parents=True)
    (ops / "runs").mkdir()
    monkeypatch.chdir(ops)
    unpacked = tmp_path / "unpacked"  # no git: an archive's folders
    loose = _original(unpacked, str(_project(unpacked, "echo")))
    evil = tmp_path / "evil"
    (evil / ".git").mkdir(parents=True)
    (ops / "runs" / "latest").symlink_to(_original(evil, str(_project(evil, "echo"))))
    before = sorted(tmp_path.rglob("*"))
    for run, root in ((loose, ops), (ops / "runs" / "latest", ops)):
        code, err = _rerun([str(run), "--reason", "again"], capsys)
        assert code == 2 and f"outside the checkout {root}" in err, err
    assert sorted(tmp_path.rglob("*")) == before

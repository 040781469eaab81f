"""show, diff and rerun read a run only through the verified reader
(`runfolder.sealed.read_record`): a folder never sealed is refused RUN-UNSEALED and one
changed after its seal RUN-NOT-INTACT (exit 1), before any of it is acted on, and nothing
is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.base.catalogue import RUN_NOT_INTACT, RUN_UNSEALED
from harness.base.errors import Refused
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.runfolder.runjson import RunRecord
from harness.measure.runfolder.sealed import read_record
from tests.inprocess import invoke


def _record(run_id: str, status: str = "refused", campaign: str = "campaigns/c.yaml") -> dict:
    return RunRecord(run_id=run_id, status=status, attempt=1, seal="sha256:s",
                     campaign={"name": "c", "file": campaign},
                     control={"name": "echo"}).as_dict()


def _folder(parent: Path, run_id: str, *, seal: bool, **kw) -> Path:
    run = parent / "runs" / run_id
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps(_record(run_id, **kw)))
    (run / "metrics.json").write_text('{"metrics": {"kv_cache_gib": 19.0}}')
    if seal:
        write_manifest(run)
    return run


def _edited(run: Path, **changes) -> Path:
    """run.json rewritten after the seal (a forged status, another campaign)."""
    doc = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**doc, **changes}))
    return run


def _tree(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*")}


def _refused(argv: list[str], rule: str, root: Path) -> str:
    before = _tree(root)
    code, out = invoke(*argv)
    assert code == 1 and f"[{rule}]" in out, (code, out)
    assert "Traceback" not in out
    assert _tree(root) == before  # nothing written, nothing touched
    return out


# ---- the reader ----------------------------------------------------------------------------

def test_the_reader_returns_a_sealed_intact_record(tmp_path: Path) -> None:
    run = _folder(tmp_path, "r1", seal=True)
    assert read_record(run).status == "refused"


@pytest.mark.parametrize(("seal", "edit", "rule"), [
    (False, False, RUN_UNSEALED), (True, True, RUN_NOT_INTACT)])
def test_the_reader_refuses_an_unsealed_or_edited_folder(tmp_path: Path, seal: bool,
                                                        edit: bool, rule: str) -> None:
    run = _folder(tmp_path, "r1", seal=seal)
    if edit:
        _edited(run, status="accepted")
    with pytest.raises(Refused) as e:
        read_record(run)
    assert e.value.rule == rule and e.value.code == 1


# ---- harness show --------------------------------------------------------------------------

@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_show_refuses_an_unsealed_folder(tmp_path: Path, json_flag: tuple) -> None:
    run = _folder(tmp_path, "r1", seal=False)
    out = _refused(["show", *json_flag, str(run)], RUN_UNSEALED, tmp_path)
    assert "never sealed" in out


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_show_refuses_a_run_json_edited_after_the_seal(tmp_path: Path,
                                                      json_flag: tuple) -> None:
    run = _edited(_folder(tmp_path, "r1", seal=True), status="accepted")
    out = _refused(["show", *json_flag, str(run)], RUN_NOT_INTACT, tmp_path)
    assert "run.json: changed" in out and '"accepted"' not in out


def test_show_reads_the_same_folder_sealed_and_intact(tmp_path: Path) -> None:
    code, out = invoke("show", "--json", str(_folder(tmp_path, "r1", seal=True)))
    assert code == 0 and json.loads(out)["status"] == "refused"


# ---- harness diff --------------------------------------------------------------------------

@pytest.mark.parametrize("unsealed", ["a", "b"])
def test_diff_refuses_either_side_unsealed(tmp_path: Path, unsealed: str) -> None:
    a = _folder(tmp_path, "a", seal=unsealed != "a")
    b = _folder(tmp_path, "b", seal=unsealed != "b", status="accepted")
    out = _refused(["diff", str(a), str(b), "--json"], RUN_UNSEALED, tmp_path)
    assert f"runs/{unsealed} was never sealed" in out


@pytest.mark.parametrize("edited", ["run.json", "metrics.json"])
def test_diff_refuses_a_side_edited_after_the_seal(tmp_path: Path, edited: str) -> None:
    """Every file a side is read for is vouched for: run.json and the rest alike."""
    a = _folder(tmp_path, "a", seal=True)
    b = _folder(tmp_path, "b", seal=True, status="accepted")
    (b / edited).write_text('{"metrics": {}}' if edited == "metrics.json"
                            else json.dumps(_record("b", status="refused")))
    out = _refused(["diff", str(a), str(b)], RUN_NOT_INTACT, tmp_path)
    assert f"{edited}: changed" in out


def test_diff_reads_two_sealed_intact_folders(tmp_path: Path) -> None:
    a = _folder(tmp_path, "a", seal=True)
    b = _folder(tmp_path, "b", seal=True, status="accepted")
    code, out = invoke("diff", str(a), str(b), "--json")
    assert code == 0 and json.loads(out)["differs"] == ["status"]


# ---- harness rerun -------------------------------------------------------------------------

def test_rerun_refuses_an_unsealed_original(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = _folder(tmp_path, "r1", seal=False)
    out = _refused(["rerun", str(run), "--reason", "again"], RUN_UNSEALED, tmp_path)
    assert "never sealed" in out


def test_rerun_refuses_an_original_edited_after_the_seal(tmp_path: Path,
                                                         monkeypatch) -> None:
    """An edited record never chooses what a rerun runs: it is refused as not intact
    before the campaign it now names (a device here) is looked at."""
    monkeypatch.chdir(tmp_path)
    run = _folder(tmp_path, "r1", seal=True)
    _edited(run, campaign={"name": "c", "file": "/dev/zero"})
    out = _refused(["rerun", str(run), "--reason", "again"], RUN_NOT_INTACT, tmp_path)
    assert "run.json: changed" in out and "outside the checkout" not in out

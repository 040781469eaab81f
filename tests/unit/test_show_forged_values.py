"""Red team: `harness show` over forged run.json values: an approval row must never claim
the approval reviewed the commit the run ran at when either commit is unrecorded (None ==
None is no match), and escape characters in approval/rerun_of values stay inert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.measure.runfolder.manifest import write_manifest
from harness.measure.runfolder.runjson import RunRecord
from harness.measure.runfolder.sealed import read_record
from harness.readers.runview import render_run

COMMIT = "a" * 40


def _shown(tmp_path: Path, **kw) -> str:
    """Show a sealed run whose record is well shaped, the forged values in its fields."""
    doc = RunRecord(run_id="run-x", status="accepted", attempt=2, seal="sha256:s",
                    campaign={"name": "c"}, control={"name": "k"},
                    image={"name": "r", "id": "i"}).as_dict() | kw
    (tmp_path / "run.json").write_text(json.dumps(doc))
    write_manifest(tmp_path)
    console = Console(record=True, width=400, color_system=None)
    before = sorted(tmp_path.rglob("*"))
    render_run(tmp_path, read_record(tmp_path), console)
    assert sorted(tmp_path.rglob("*")) == before  # show writes nothing
    return console.export_text()


@pytest.mark.parametrize(("approval", "provenance"), [
    ({"file": "gates/x.json", "digest": "sha256:d"}, None),
    ({"file": "gates/x.json", "digest": "sha256:d", "commit": None},
     {"commit": None, "dirty": None, "changed": [], "error": "git not found on PATH"}),
    ({"file": "gates/x.json", "digest": "sha256:d", "commit": 1}, {"commit": 1}),
])
def test_an_unrecorded_commit_is_never_shown_as_the_reviewed_one(
        tmp_path: Path, approval: dict, provenance: dict | None) -> None:
    kw = {"approval": approval} | ({"provenance": provenance} if provenance else {})
    out = _shown(tmp_path, **kw)
    assert "approval" in out and ": the commit this run ran at" not in out
    assert "not known whether it is the commit this run ran at" in out


def test_a_recorded_matching_commit_is_shown_as_the_reviewed_one(tmp_path: Path) -> None:
    out = _shown(tmp_path, approval={"file": "g", "digest": "d", "commit": COMMIT},
                 provenance={"commit": COMMIT, "dirty": False, "changed": []})
    assert f"reviewed commit {COMMIT}: the commit this run ran at" in out


def test_escape_characters_in_approval_and_rerun_of_are_inert(tmp_path: Path) -> None:
    evil = "x\x1b]0;title\x07\n\u202eaccepted\u2028y"
    out = _shown(tmp_path, approval={"file": evil, "digest": evil, "commit": evil},
                 rerun_of={"run_id": evil, "path": evil, "reason": evil})
    for bad in ("\x1b", "\x07", "\u202e", "\u2028"):
        assert bad not in out
    assert "x\\x1b]0;title\\x07\\x0a\\u202eaccepted\\u2028y" in out

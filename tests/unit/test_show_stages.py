"""`harness show` lists the stages a run went through, inert whatever the record says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.base.errors import InvalidInput
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.runfolder.runjson import RunRecord
from harness.measure.runfolder.sealed import read_record
from harness.readers.runview import render_run


def _shown(tmp_path: Path, stages: object) -> str:
    doc = RunRecord(run_id="r1", status="refused", campaign={"name": "c"},
                    control={"name": "k"}, stages=stages).as_dict()  # type: ignore[arg-type]
    (tmp_path / "run.json").write_text(json.dumps(doc))
    write_manifest(tmp_path)
    console = Console(record=True, width=200, color_system=None)
    render_run(tmp_path, read_record(tmp_path), console)
    return console.export_text()


def test_each_stage_with_its_result_and_time(tmp_path: Path) -> None:
    out = _shown(tmp_path, [{"name": "preflight", "result": "ok", "seconds": 0.08},
                            {"name": "launch", "result": "error", "seconds": 1.5,
                             "rule": "ENV-IO"}])
    assert "preflight ok (0.08 s) · launch error (1.5 s)" in out and "stages " in out


def test_hostile_stage_entries_are_shown_inert(tmp_path: Path) -> None:
    out = _shown(tmp_path, [{"name": "\x1b]8;;http://x\x07pre", "result": ["x"],
                             "seconds": "\x1b[2J"}])
    assert "\x1b" not in out and "\x07" not in out
    assert "stages     \\x1b]8;;http://x\\x07pre [\"x\"] (\\x1b[2J s)" in out


@pytest.mark.parametrize(("stages", "fault"), [
    ([{"name": "preflight"}, "junk"], "stages[1] is not an object"),
    ([7], "stages[0] is not an object"),
    ([{"result": "ok"}], "stages[0] has no name"),
    ([{"name": ""}], "stages[0] has no name"),
    ({"name": "preflight"}, "stages has the wrong type (dict)"),
])
def test_a_stage_that_is_not_a_named_object_is_bad_input(tmp_path: Path, stages: object,
                                                         fault: str) -> None:
    with pytest.raises(InvalidInput) as e:
        _shown(tmp_path, stages)
    assert fault in e.value.faults and "not a run record" in e.value.message

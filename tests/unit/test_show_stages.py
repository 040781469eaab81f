"""`harness show` lists the stages a run went through, inert whatever the record says."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from harness.runfolder import record
from harness.show import render_run


def _shown(tmp_path: Path, stages: object) -> str:
    doc = {"schema": record.SCHEMA, "run_id": "r1", "status": "refused", "reasons": [],
           "rules": [], "stages": stages}
    (tmp_path / "run.json").write_text(json.dumps(doc))
    console = Console(record=True, width=200, color_system=None)
    render_run(tmp_path, record.read(tmp_path), console)
    return console.export_text()


def test_each_stage_with_its_result_and_time(tmp_path: Path) -> None:
    out = _shown(tmp_path, [{"name": "preflight", "result": "ok", "seconds": 0.08},
                            {"name": "launch", "result": "error", "seconds": 1.5,
                             "rule": "ENV-IO"}])
    assert "preflight ok (0.08 s) · launch error (1.5 s)" in out and "stages " in out


def test_hostile_stage_entries_are_shown_inert_or_skipped(tmp_path: Path) -> None:
    out = _shown(tmp_path, [{"name": "\x1b]8;;http://x\x07pre", "result": ["x"]}, "junk", 7])
    assert "\x1b" not in out and "\x07" not in out
    assert "stages" in out and "junk" not in out

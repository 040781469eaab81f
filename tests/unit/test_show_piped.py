"""`harness show | cat`: every Id, seal and path whole, on one line, with no padding.

Run as an operator would pipe it (a subprocess, stdout not a terminal), at the 80
columns rich assumes then: nothing is cut to "…", wrapped mid-hash or padded with spaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.measure.runfolder import runjson
from harness.measure.runfolder.manifest import write_manifest

IMAGE = "sha256:" + "ab12" * 16
SEAL = "sha256:" + "9f" * 32
RUN_ID = "20261130T184700Z-rehearsal-gate0-5c1d2e3f"


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / ("gpu-runs-with-a-long-folder-name-" + "x" * 40) / RUN_ID
    run.mkdir(parents=True)
    doc = {"schema": runjson.SCHEMA, "run_id": RUN_ID, "status": "refused",
           "campaign": {"name": "rehearsal", "row": "2"}, "control": {"name": "rehearsal-gate0"},
           "attempt": 1, "image": {"id": IMAGE}, "seal": SEAL,
           "outcome": {"exit_code": 0, "duration_s": 2.490031047000002},
           "lock": {"path": str(tmp_path / "locks" / "gpu.lock"), "acquired": "a",
                    "released": "b", "wait_s": 0.000123},
           "reasons": [{"rule": "GATE0-FIELD-DIFFERS", "by": "gate0",
                        "detail": "compilation.custom_ops differs " + "y" * 120}],
           "rules": ["GATE0-FIELD-DIFFERS"]}
    (run / "run.json").write_text(json.dumps(doc))
    write_manifest(run)  # show reads only a sealed, intact run
    return run


def _show(run: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "harness", "show", *args, str(run)],
                          capture_output=True, text=True, timeout=60, env=env)


def test_piped_show_keeps_ids_whole_on_one_line_without_padding(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    r = _show(run)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "…" not in r.stdout and "\x1b" not in r.stdout
    assert [ln for ln in lines if ln != ln.rstrip()] == []
    image = [ln for ln in lines if ln.startswith("image")]
    assert image == [f"image      {IMAGE}"]
    assert [ln for ln in lines if ln.startswith("seal")] == [f"seal       {SEAL}"]
    lock = [ln for ln in lines if ln.startswith("lock")]
    assert len(lock) == 1 and str(tmp_path / "locks" / "gpu.lock") in lock[0]
    reason = [ln for ln in lines if "GATE0-FIELD-DIFFERS" in ln]
    assert len(reason) == 1 and reason[0].endswith("y" * 120)


def test_piped_show_reads_seconds_as_a_person_would(tmp_path: Path) -> None:
    out = _show(_run_folder(tmp_path)).stdout
    assert "duration   2.49 s" in out.splitlines()
    assert "(waited 0.000123 s)" in out
    assert "2.490031047" not in out


def test_show_json_is_the_record_as_it_is(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    r = _show(run, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["image"]["id"] == IMAGE and doc["outcome"]["duration_s"] == 2.490031047000002

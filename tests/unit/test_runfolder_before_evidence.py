"""A run folder sealed before evidence became one shape (tests/fixtures/runfolder/
SOURCES.md) still reads: its record, `verify`, `show` and `diff`, with the telemetry and
kernel-log blocks the evidence sources still fill in the same shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.measure.runfolder import layout, runjson
from harness.pipeline import evidence
from tests.inprocess import invoke

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runfolder"
RUN = "faulted-20261206T121522Z-696bf65d"


def sealed(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / RUN
    shutil.copytree(FIXTURE / RUN, run)
    return run


def test_its_record_reads_with_every_block(tmp_path: Path) -> None:
    run = sealed(tmp_path)
    rec = runjson.read(run)
    raw = json.loads((run / layout.RECORD).read_text())
    assert rec.telemetry == raw["telemetry"] and rec.kernel_log == raw["kernel_log"]
    assert rec.as_dict() == raw  # written again, byte for byte the same document
    assert rec.rules == ["KERNEL-LOG-GPU-RESET"]
    # the blocks the evidence fills today are the blocks it held
    assert set(evidence.blocks(layout.RECORD, {})) <= set(raw)


def test_verify_show_and_diff_read_it(tmp_path: Path) -> None:
    run = sealed(tmp_path)
    code, out = invoke("verify", str(run))
    assert code == 0, out
    code, out = invoke("show", str(run))
    assert code == 0 and "KERNEL-LOG-GPU-RESET" in out, out
    other = tmp_path / "other" / RUN
    shutil.copytree(run, other)
    code, out = invoke("diff", str(run), str(other))
    assert code == 0, out


OLDER = {"rehearsal-compute-20261206T130926Z-091a64dc": ("accepted", []),
         "rehearsal-gate0-20261206T130928Z-36cf1ca6": ("refused", ["GATE0-FIELD-DIFFERS"])}


def test_runs_sealed_before_the_evidence_shape_read_verify_show_and_bundle(
        tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in OLDER:
        shutil.copytree(FIXTURE / name, runs / name)
    for name, (status, rules) in OLDER.items():
        rec = runjson.read(runs / name)
        assert (rec.status, rec.rules) == (status, rules)
        assert rec.as_dict() == json.loads((runs / name / layout.RECORD).read_text())
        code, out = invoke("verify", str(runs / name))
        assert code == 0, out
        code, out = invoke("show", str(runs / name))
        assert code == 0 and status in out, out
    code, out = invoke("diff", *(str(runs / n) for n in OLDER))
    assert code == 0 and "compilation.custom_ops" in out, out
    archive = tmp_path / "old.tar"
    code, out = invoke("bundle", "export", "-o", str(archive), *(str(runs / n) for n in OLDER))
    assert code == 0, out
    code, out = invoke("bundle", "verify", str(archive))
    assert code == 0, out

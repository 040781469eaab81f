"""Red team: forged run folders fed to `harness diff`. The --json document must stay JSON
that strict readers accept (no NaN/Infinity smuggled in through a run folder's values), and
a run.json that is not strict JSON is bad input (exit 2, a precise message, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.judge import difference as diff_module
from harness.judge.difference import diff_runs, engine_args
from harness.measure.runfolder.manifest import write_manifest

RECORD = {"schema": "harness.run/v2", "run_id": "run-x", "attempt": 1, "status": "refused",
          "reasons": [], "rules": [], "seal": "sha256:s", "image": {"name": "r", "id": "i"},
          "model_hashes": {}, "campaign": {"name": "camp"}, "control": {"name": "k"}}


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in the diff document")
    return json.loads(text, parse_constant=refuse)


def _run(path: Path, record_text: str | None = None, files: dict | None = None) -> Path:
    """A sealed run folder (diff reads only what a seal vouches for)."""
    path.mkdir(parents=True)
    (path / "run.json").write_text(record_text or json.dumps(RECORD))
    for name, text in (files or {}).items():
        (path / name).write_text(text)
    write_manifest(path)
    return path


def _diff_json(a: Path, b: Path, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(["diff", str(a), str(b), "--json"])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize("args", ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}',
                                  '{"x": 1e999}', '[-1e400]'])
def test_non_finite_engine_args_are_kept_as_text_and_the_document_stays_json(
        tmp_path: Path, args: str, capsys) -> None:
    vector = json.dumps({"argv": ["docker", "run", "--env", f"HARNESS_ENGINE_ARGS={args}"]})
    a = _run(tmp_path / "a", files={"docker-vector.json": vector})
    b = _run(tmp_path / "b")
    assert engine_args(json.loads(vector)) == args  # the raw text, not a float
    code, out, _ = _diff_json(a, b, capsys)
    assert code == 0
    assert _strict(out)["topics"]["engine"]["a"] == args


@pytest.mark.parametrize("metrics", ['{"metrics": {"x": 1e999}}', '{"metrics": {"x": NaN}}'])
def test_non_finite_metrics_become_a_note(tmp_path: Path, metrics: str, capsys) -> None:
    a = _run(tmp_path / "a", files={"metrics.json": metrics})
    code, out, _ = _diff_json(a, _run(tmp_path / "b"), capsys)
    doc = _strict(out)
    assert code == 0 and doc["topics"]["figures"]["same"] is None
    assert any("metrics.json" in n for n in doc["a"]["notes"])


def test_a_run_json_with_an_overflowing_number_is_bad_input(tmp_path: Path, capsys) -> None:
    text = json.dumps({**RECORD, "provenance": {"commit": "c"}}).replace('"c"', "1e999")
    a = _run(tmp_path / "a", record_text=text)
    code, out, err = _diff_json(a, _run(tmp_path / "b"), capsys)
    assert code == 2 and out == ""
    assert "run.json" in err and "1e999 is not a finite number" in err
    assert "Traceback" not in err


def test_strict_loads_keeps_finite_numbers() -> None:
    assert diff_module.loads('{"a": 1.5, "b": 1e308, "c": -2}') == {"a": 1.5, "b": 1e308, "c": -2}


def test_diff_writes_nothing_into_either_folder(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", files={"metrics.json": '{"metrics": {"x": 1e999}}'})
    b = _run(tmp_path / "b")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    diff_runs(a, b)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before

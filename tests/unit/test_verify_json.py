"""`harness verify`: a folder that is not a run is bad input (2), a tampered run fails (1);
`--json` gives one JSON object on stdout with the same exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import write_manifest


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=60)


def _sealed(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"status": "accepted"}\n')
    (run / "out.txt").write_text("hello\n")
    write_manifest(run)
    return run


def test_a_folder_that_is_not_a_run_is_invalid_input(tmp_path: Path) -> None:
    (tmp_path / "nights").mkdir()
    r = _harness("verify", str(tmp_path / "nights"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "not a run folder" in r.stderr and "Traceback" not in r.stderr
    j = _harness("verify", "--json", str(tmp_path / "nights"))
    assert j.returncode == 2
    doc = json.loads(j.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2 and "not a run folder" in doc["error"]


def test_a_run_without_its_seal_is_a_failed_verification_not_bad_input(tmp_path: Path) -> None:
    run = _sealed(tmp_path)
    (run / SUMS).chmod(0o644)
    run.chmod(0o755)
    (run / SUMS).unlink()
    r = _harness("verify", "--json", str(run))
    assert r.returncode == 1
    assert json.loads(r.stdout)["problems"] == [
        {"path": SUMS, "kind": "no-manifest", "detail": None}]


def test_json_names_each_problem_and_exits_as_the_plain_form(tmp_path: Path) -> None:
    run = _sealed(tmp_path)
    ok = _harness("verify", "--json", str(run))
    assert ok.returncode == 0 and ok.stderr == ""
    assert json.loads(ok.stdout) == {"path": str(run), "ok": True, "exit_code": 0,
                                     "problems": []}
    (run / "out.txt").chmod(0o644)
    (run / "out.txt").write_text("changed\n")
    bad = _harness("verify", "--json", str(run))
    plain = _harness("verify", str(run))
    assert bad.returncode == plain.returncode == 1
    assert len(bad.stdout.splitlines()) == 1
    doc = json.loads(bad.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 1
    assert doc["problems"] == [{"path": "out.txt", "kind": "changed", "detail": None}]


def test_json_for_a_path_that_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for target in ("file", "absent"):
        r = _harness("verify", "--json", str(tmp_path / target))
        assert r.returncode == 2
        assert json.loads(r.stdout)["exit_code"] == 2

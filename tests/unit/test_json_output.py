"""`--json` on check, images verify and bundle verify: one JSON object on stdout, whatever
happened, with the exit code the plain form gives (0, 1, 2 or 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bundle_helpers import make_run, rebag, writable_bundle

from harness.readers.bundle.export import export_bundle

REPO = Path(__file__).resolve().parents[2]


def _harness(*args: str) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
    lines = r.stdout.splitlines()
    assert len(lines) == 1, (r.stdout, r.stderr)
    doc = json.loads(lines[0])
    assert doc["exit_code"] == r.returncode
    return r.returncode, doc


def test_check_json_valid_and_faulty(tmp_path: Path) -> None:
    code, doc = _harness("check", "--json", "campaigns/rehearsal.yaml")
    assert (code, doc["ok"], doc["faults"]) == (0, True, [])
    bad = tmp_path / "bad.yaml"
    bad.write_text("x: [\n")
    code, doc = _harness("check", "--json", str(bad))
    assert code == 2 and doc["ok"] is False
    [fault] = doc["faults"]
    assert fault["file"] == str(bad) and fault["line"] == 2 and "YAML" in fault["message"]


def test_images_verify_json_bad_name_and_bad_lock(tmp_path: Path) -> None:
    code, doc = _harness("images", "verify", "--json", "no-such-name")
    assert code == 2 and "no-such-name" in doc["error"]
    lock = tmp_path / "images.lock"
    lock.write_text("images: 7\n")
    code, doc = _harness("images", "verify", "--json", "--images-lock", str(lock))
    assert code == 2 and doc["ok"] is False and doc["faults"]


def test_bundle_verify_json_ok_and_tampered(tmp_path: Path) -> None:
    run = make_run(tmp_path / "gpu-runs", full=False)
    export_bundle([run], tmp_path / "b.tar")
    code, doc = _harness("bundle", "verify", "--json", str(tmp_path / "b.tar"))
    assert code == 0 and doc["ok"] is True and doc["runs"] and doc["problems"] == []
    root = writable_bundle(tmp_path / "b.tar", tmp_path / "x")
    (root / f"data/{run.name}/logs/stdout.log").write_text("rewritten\n")
    rebag(root)
    code, doc = _harness("bundle", "verify", "--json", str(root))
    assert code == 1 and doc["ok"] is False
    assert [(p["kind"], p["path"]) for p in doc["problems"]] == [
        ("changed", f"data/{run.name}/logs/stdout.log")]
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    code, doc = _harness("bundle", "verify", "--json", str(tmp_path / "junk.tar"))
    assert code == 2 and doc["error"]

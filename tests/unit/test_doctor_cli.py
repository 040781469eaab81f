"""`harness doctor` as a command: options, exit codes, JSON and plain output."""

from __future__ import annotations

import json

from click.testing import CliRunner

from harness.base.errors import InvalidInput
from harness.cli.doctor import doctor, load_expected_images

GHOST = "sha256:" + "0" * 64


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(doctor, list(args), env=env)


def test_json_output_and_exit_1_when_a_check_fails(tmp_path):
    lock = tmp_path / "images.lock"
    lock.write_text(f'images:\n  ghost:\n    id: "{GHOST}"\n    ref: null\n    repo_digest: null\n')
    result = invoke(
        "--json",
        "--images-lock",
        str(lock),
        "--lock",
        str(tmp_path / "gpu.lock"),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--profile",
        "cpu",
        env={"PATH": str(tmp_path)},
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    assert doc["schema"] == "harness.doctor/v1" and doc["ok"] is False
    lines = {c["name"]: c for c in doc["checks"]}
    assert lines["image ghost"]["status"] == "fail"
    assert lines["engine"]["status"] == "ok"
    assert lines["rocminfo"]["status"] == "warn"  # cpu profile


def test_missing_images_lock_is_a_fail_line_and_plain_output_off_a_terminal(tmp_path):
    result = invoke(
        "--images-lock",
        str(tmp_path / "nope.lock"),
        "--lock",
        str(tmp_path / "gpu.lock"),
        "--runs-dir",
        str(tmp_path),
        "--profile",
        "cpu",
    )
    assert result.exit_code == 1
    first = result.output.splitlines()
    assert first[0].startswith("ok    engine")
    assert any(line.startswith("fail  images") and "nope.lock not found" in line for line in first)
    assert first[-1].startswith("host NOT ready: ")


def test_exit_0_when_nothing_fails(tmp_path):
    lock = tmp_path / "images.lock"
    lock.write_text("images: {}\n")
    result = invoke(
        "--images-lock",
        str(lock),
        "--lock",
        str(tmp_path / "gpu.lock"),
        "--runs-dir",
        str(tmp_path),
        "--profile",
        "cpu",
    )
    assert result.exit_code == 0, result.output
    assert "fail " not in result.output
    assert result.output.splitlines()[-1].startswith("host ready: ")


def test_malformed_images_lock_is_invalid_input(tmp_path):
    lock = tmp_path / "images.lock"
    lock.write_text("images:\n  x:\n    id: 42\n    colour: red\n")
    result = invoke("--images-lock", str(lock), "--profile", "cpu")
    assert isinstance(result.exception, InvalidInput)
    assert result.exception.code == 2
    assert result.exception.faults and all(str(lock) in f for f in result.exception.faults)


def test_load_expected_images_shape(tmp_path):
    lock = tmp_path / "images.lock"
    lock.write_text(
        f'images:\n  app:\n    id: "{GHOST}"\n    ref: "app:1"\n    repo_digest: null\n'
    )
    assert load_expected_images(lock) == {"app": {"id": GHOST, "ref": "app:1", "store": None}}
    assert load_expected_images(tmp_path / "absent") is None


def test_bad_profile_is_a_usage_error():
    result = invoke("--profile", "cuda")
    assert result.exit_code == 2

"""`harness images pin`, `images verify` and `doctor` on the real engine, on a temporary lock."""

from __future__ import annotations

import hashlib
import subprocess
import uuid

import pytest
import yaml

NEVER = ("re-pin", "re-lock", "repin", "relock", "images pin")


@pytest.fixture
def other_image(rehearsal_image):
    """A second local image with another Id: the rehearsal image plus one label."""
    tag = f"harness-pin-test:{uuid.uuid4().hex[:12]}"
    r = subprocess.run(["docker", "build", "-q", "-t", tag, "-"], capture_output=True,
                       text=True, input=f"FROM {rehearsal_image}\nLABEL harness.test={tag}\n")
    assert r.returncode == 0, r.stderr
    image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert image_id != rehearsal_image
    yield tag, image_id
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def pin(project, *args: str) -> subprocess.CompletedProcess:
    return project.harness("images", "pin", *args, "--images-lock", "test.lock")


def lock(project) -> dict:
    return yaml.safe_load((project.root / "test.lock").read_text())["images"]


def test_pin_same_refuse_then_replace_with_reason(project, other_image):
    tag, other_id = other_image
    r = pin(project, "app", "harness-rehearsal:local")
    assert r.returncode == 0 and project.image_id in r.stdout, r.stderr
    before = (project.root / "test.lock").read_bytes()

    r = pin(project, "app", project.image_id)
    assert r.returncode == 0 and "no change" in r.stdout, r.stderr
    assert (project.root / "test.lock").read_bytes() == before

    r = pin(project, "app", tag)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "IMAGE-PIN-EXISTS" in r.stderr and project.image_id in r.stderr and other_id in r.stderr
    assert (project.root / "test.lock").read_bytes() == before

    r = pin(project, "app", tag, "--replace", "--reason", "approved: new label")
    assert r.returncode == 0, r.stderr
    assert f"old: {project.image_id}" in r.stdout and f"new: {other_id}" in r.stdout
    entry = lock(project)["app"]
    assert entry["id"] == other_id and entry["ref"] == tag
    [change] = entry["history"]
    assert (change["old"], change["new"], change["reason"]) == (
        project.image_id, other_id, "approved: new label")
    assert change["user"] and change["at"].endswith("Z")
    r = project.harness("check", "test.lock")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args", [
    ("x\n", "harness-rehearsal:local"), ("x", ""), ("x", "harness-rehearsal:local\n"),
    ("", "harness-rehearsal:local"),
    ("x", "harness-rehearsal:local", "--replace"),
    ("x", "harness-rehearsal:local", "--replace", "--reason", "two\nlines"),
    ("x", "harness-rehearsal:local", "--build", ""),
])
def test_bad_names_refs_and_reasons_exit_2_with_a_message(project, args):
    r = pin(project, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip()
    assert not (project.root / "test.lock").exists()


def test_archive_pin_then_missing_image_advice_says_docker_load(project, other_image, tmp_path):
    tag, other_id = other_image
    archive = tmp_path / "other.tar"
    subprocess.run(["docker", "save", "-o", str(archive), tag], check=True, capture_output=True)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()

    r = pin(project, "seed", project.image_id, "--archive", str(archive))
    assert r.returncode == 1 and "IMAGE-ARCHIVE-MISMATCH" in r.stderr, r.stderr
    r = pin(project, "seed", tag, "--archive", str(archive))
    assert r.returncode == 0, r.stderr
    assert lock(project)["seed"]["archive"] == {"sha256": digest, "name": "other.tar"}

    subprocess.run(["docker", "rmi", tag], check=True, capture_output=True)
    r = project.harness("images", "verify", "--images-lock", "test.lock")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"docker load -i other.tar (archive sha256 {digest})" in r.stdout
    r = project.harness("doctor", "--images-lock", "test.lock", "--profile", "cpu",
                        "--lock", str(project.lock), "--runs-dir", str(project.runs))
    line = next(ln for ln in r.stdout.splitlines() if "image seed" in ln)
    assert line.startswith("fail") and f"docker load -i other.tar (archive sha256 {digest})" in line
    for out in (r.stdout, r.stderr):
        assert not any(word in out for word in NEVER)

    subprocess.run(["docker", "load", "-i", str(archive)], check=True, capture_output=True)
    r = project.harness("images", "verify", "--images-lock", "test.lock")
    assert r.returncode == 0 and other_id in r.stdout, (r.stdout, r.stderr)

"""`harness init`: a campaign repository to start from, that checks, and never overwrites."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from harness.config import scaffold
from harness.config.loader import check, load_campaign
from harness.config.schema import Campaign, Control, ImageLock
from harness.judge.doctor.checks import judge_images

NAMES = [".gitignore", "README.md", "campaigns/cpu-example.yaml",
         "campaigns/vllm-gfx1100.yaml", "controls/cpu-example.yaml",
         "controls/vllm-native.yaml", "harness.toml", "images.lock"]


def harness(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120, env=env)


def texts() -> dict[str, str]:
    return {f.path: f.text for f in scaffold.files()}


# ---- the pure part: which files, with what in them -------------------------------------------

def test_the_scaffold_names_every_file_once() -> None:
    assert sorted(texts()) == NAMES
    assert len(scaffold.files()) == len(NAMES)


def test_the_runs_dir_is_named_and_git_ignored() -> None:
    files = texts()
    assert tomllib.loads(files["harness.toml"]) == {"runs_dir": scaffold.RUNS_DIR}
    ignored = [line for line in files[".gitignore"].splitlines()
               if line and not line.startswith("#")]
    assert ignored == [f"/{scaffold.RUNS_DIR}/"]


def test_each_document_is_valid_and_the_lock_pins_nothing() -> None:
    files = texts()
    assert ImageLock.model_validate(yaml.safe_load(files["images.lock"])).images == {}
    cpu = Control.model_validate(yaml.safe_load(files["controls/cpu-example.yaml"]))
    gpu = Control.model_validate(yaml.safe_load(files["controls/vllm-native.yaml"]))
    assert cpu.device == "cpu" and cpu.command[0] == "python3" and cpu.model is None
    assert (gpu.device, gpu.instrument, [p.name for p in gpu.post_steps]) == (
        "rocm", True, ["exit-code", "gate0"])
    assert gpu.model is not None and gpu.model.sha256 == {}  # left for the operator
    camp = Campaign.model_validate(yaml.safe_load(files["campaigns/vllm-gfx1100.yaml"]))
    assert camp.require_approval and camp.host.gfx == "gfx1100"
    assert [c.control for c in camp.controls] == ["vllm-native"]


def test_the_readme_gives_the_next_steps_and_points_to_the_guide() -> None:
    readme = texts()["README.md"]
    assert scaffold.README_SLOT not in readme
    assert all(line in readme for line in scaffold.next_steps())
    assert "docs/host-setup.md" in readme and "http" not in readme


def test_a_missing_file_is_created_an_existing_one_kept() -> None:
    assert scaffold.decide("campaigns/a.yaml", {}).action == "create"
    assert scaffold.decide("campaigns/a.yaml", {"campaigns": "folder"}).action == "create"
    kept = scaffold.decide("harness.toml", {"harness.toml": "file"})
    assert (kept.action, kept.done) == ("keep", True)


@pytest.mark.parametrize("kind", ["symlink", "folder", "other"])
def test_anything_else_in_the_way_is_named_never_followed(kind: str) -> None:
    step = scaffold.decide("images.lock", {"images.lock": kind})
    assert (step.action, step.done) == ("blocked", False)
    assert "not followed" in step.why


@pytest.mark.parametrize("kind", ["symlink", "file", "other"])
def test_a_folder_above_that_is_not_a_folder_blocks_the_files_below(kind: str) -> None:
    step = scaffold.decide("campaigns/a.yaml", {"campaigns": kind})
    assert step.action == "blocked" and step.why.startswith("campaigns is a ")


# ---- the command ------------------------------------------------------------------------------

def test_init_writes_every_file_and_a_repository(tmp_path: Path) -> None:
    r = harness("init", "repo", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    root = tmp_path / "repo"
    for name, text in texts().items():
        assert (root / name).read_text() == text
        assert f"created  repo/{name}" in r.stdout
    assert (root / ".git").is_dir() and "git: initialised" in r.stdout
    assert "cd repo" in r.stdout and "harness images pin vllm-rocm REF" in r.stdout
    again = harness("init", "repo", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("kept     repo/") == len(NAMES)
    assert "not initialised again" in again.stdout


def test_init_never_overwrites_a_file(tmp_path: Path) -> None:
    (tmp_path / "harness.toml").write_text('runs_dir = "mine"\n')
    (tmp_path / "campaigns").mkdir()
    (tmp_path / "campaigns" / "cpu-example.yaml").write_text("mine\n")
    r = harness("init", "--no-git", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "harness.toml").read_text() == 'runs_dir = "mine"\n'
    assert (tmp_path / "campaigns" / "cpu-example.yaml").read_text() == "mine\n"
    assert "kept     harness.toml (a file is there: not overwritten)" in r.stdout
    assert "created  campaigns/vllm-gfx1100.yaml" in r.stdout
    assert not (tmp_path / ".git").exists()


def test_a_symlink_in_the_way_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("untouched\n")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "images.lock").symlink_to(outside / "victim")
    (root / "README.md").symlink_to(outside / "absent")  # dangling: not created through
    (root / "controls").symlink_to(outside, target_is_directory=True)
    r = harness("init", "--no-git", cwd=root)
    assert r.returncode == 1, r.stdout
    assert (outside / "victim").read_text() == "untouched\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert os.readlink(root / "images.lock") == str(outside / "victim")
    assert "blocked  images.lock (a symlink is in the way" in r.stdout
    assert "blocked  README.md (a symlink is in the way" in r.stdout
    assert "blocked  controls/cpu-example.yaml (controls is a symlink" in r.stdout
    assert "blocked  controls/vllm-native.yaml (controls is a symlink" in r.stdout
    assert "4 file(s) not written" in r.stderr
    assert (root / "campaigns" / "cpu-example.yaml").is_file()  # the rest is written


def test_a_dir_whose_parent_is_missing_is_bad_input(tmp_path: Path) -> None:
    r = harness("init", "no/such/repo", cwd=tmp_path)
    assert r.returncode == 2, r.stdout
    assert "parent folder" in r.stderr and not (tmp_path / "no").exists()
    (tmp_path / "file").write_text("")
    assert harness("init", "file", cwd=tmp_path).returncode == 2


def test_inside_a_work_tree_no_repository_is_made(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    r = harness("init", "sub", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "sub" / ".git").exists() and "not initialised again" in r.stdout


# ---- check over what init wrote ---------------------------------------------------------------

def test_check_passes_on_a_new_repository_and_says_what_to_pin(tmp_path: Path) -> None:
    assert harness("init", "--no-git", cwd=tmp_path).returncode == 0
    files = ["campaigns/cpu-example.yaml", "campaigns/vllm-gfx1100.yaml",
             "controls/cpu-example.yaml", "controls/vllm-native.yaml", "images.lock"]
    r = harness("check", *files, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"ok: {len(files)} file(s) valid"
    image = [line for line in r.stderr.splitlines() if "IMAGE-NOT-PINNED" in line]
    assert len(image) == 2, r.stderr  # one per control naming the image
    assert all("warning: image 'vllm-rocm' is not pinned" in line
               and "`harness images pin vllm-rocm REF`" in line for line in image)
    assert any("vllm-native.yaml" in line for line in image)
    model = [line for line in r.stderr.splitlines() if "MODEL-UNPINNED" in line]
    assert len(model) == 1 and "`harness model pin FOLDER`" in model[0], r.stderr
    assert "controls/vllm-native.yaml:" in model[0]


def test_a_run_of_an_unpinned_image_is_still_refused(tmp_path: Path) -> None:
    assert harness("init", "--no-git", cwd=tmp_path).returncode == 0
    loaded, faults = load_campaign(tmp_path / "campaigns" / "cpu-example.yaml")
    assert faults == [] and loaded is not None and len(loaded.warnings) == 1
    env = {**os.environ, "HOME": str(tmp_path)}
    r = harness("run", "campaigns/cpu-example.yaml", "--dry-run", cwd=tmp_path, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "would be refused: IMAGE-NOT-PINNED" in r.stdout
    assert not (tmp_path / scaffold.RUNS_DIR).exists()


def test_a_name_near_a_pinned_one_is_still_a_fault(tmp_path: Path) -> None:
    """A typo is not an image still to pin: it stays a fault, with the name meant."""
    assert harness("init", "--no-git", cwd=tmp_path).returncode == 0
    (tmp_path / "images.lock").write_text(f"images:\n  vllm-rocm:\n    id: sha256:{'a' * 64}\n")
    ctl = tmp_path / "controls" / "cpu-example.yaml"
    ctl.write_text(ctl.read_text().replace("image: vllm-rocm", "image: vllm-rcom"))
    faults, _ = check([tmp_path / "campaigns" / "cpu-example.yaml"])
    assert [f.message for f in faults] == [
        f"image 'vllm-rcom' is not in {tmp_path / 'images.lock'} (did you mean 'vllm-rocm'?)"]


def test_doctor_fails_a_campaign_image_the_lock_does_not_pin() -> None:
    [line] = judge_images({"vllm-rocm": {}}, {"vllm-rocm": None}, {}, "overlay2")
    assert line.status == "fail" and "`harness images pin vllm-rocm REF`" in line.detail

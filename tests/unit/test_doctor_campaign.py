"""`harness doctor CAMPAIGN`: only what that campaign's controls need, so a dev box without
the seed's GPU image is ready for the rehearsal (the engine is real; nothing is mocked)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli.doctor import doctor

REPO = Path(__file__).resolve().parents[2]
GHOST = "sha256:" + "0" * 64
SEED = "sha256:" + "1" * 64


def _project(tmp_path: Path, device: str = "cpu") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "images.lock").write_text(
        f'images:\n  wanted:\n    id: "{GHOST}"\n  seed:\n    id: "{SEED}"\n')
    (tmp_path / "controls").mkdir()
    (tmp_path / "controls" / "c1.yaml").write_text(
        f"name: c1\nimage: wanted\ndevice: {device}\ncommand: [python3, -V]\n")
    camp = tmp_path / "campaigns" / "camp.yaml"
    camp.parent.mkdir()
    camp.write_text(f"name: camp\nrow: R\nlock: {tmp_path / 'gpu.lock'}\ncontrols: [c1]\n"
                    "host:\n  min_free_gib: 0.001\n")
    return camp


def _doctor(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(doctor, ["--json", *args])
    return result.exit_code, json.loads(result.output)


def test_a_campaign_limits_the_images_to_its_controls(tmp_path: Path) -> None:
    camp = _project(tmp_path)
    code, doc = _doctor(str(camp), "--runs-dir", str(tmp_path))
    names = [c["name"] for c in doc["checks"]]
    assert "image wanted" in names and "image seed" not in names
    assert code == 1  # the one image it needs is absent
    lines = {c["name"]: c for c in doc["checks"]}
    assert lines["image wanted"]["status"] == "fail"
    assert GHOST in lines["image wanted"]["detail"]  # the whole Id, never cut
    assert lines["lock"]["detail"].startswith(str(tmp_path / "gpu.lock"))
    assert all(c["status"] != "fail" for c in doc["checks"] if c["name"] != "image wanted")


def test_a_cpu_campaign_skips_the_gpu_in_one_line_a_rocm_one_checks_it(tmp_path) -> None:
    """Papercut 22: a campaign that never uses the GPU gets one `skip` line for the GPU
    checks, not six warnings; a rocm campaign still checks (and fails without a GPU)."""
    cpu = _project(tmp_path / "cpu")
    rocm = _project(tmp_path / "rocm", device="rocm")
    _, cpu_doc = _doctor(str(cpu), "--runs-dir", str(tmp_path))
    _, rocm_doc = _doctor(str(rocm), "--runs-dir", str(tmp_path))
    cpu_checks = {c["name"]: c for c in cpu_doc["checks"]}
    assert "/dev/kfd" not in cpu_checks and "rocminfo" not in cpu_checks
    assert cpu_checks["gpu"]["status"] == "skip"
    assert "the campaign runs on the cpu profile" in cpu_checks["gpu"]["detail"]
    kfd = {c["name"]: c for c in rocm_doc["checks"]}["/dev/kfd"]["status"]
    assert kfd == ("ok" if Path("/dev/kfd").exists() else "fail")
    _, forced = _doctor(str(cpu), "--runs-dir", str(tmp_path), "--profile", "cpu")
    forced_kfd = {c["name"]: c for c in forced["checks"]}["/dev/kfd"]["status"]
    assert forced_kfd == ("ok" if Path("/dev/kfd").exists() else "warn")  # asked: checked


def test_the_rehearsal_campaign_does_not_need_the_seed_image(tmp_path: Path) -> None:
    _code, doc = _doctor(str(REPO / "campaigns" / "rehearsal.yaml"), "--runs-dir",
                        str(tmp_path), "--lock", str(tmp_path / "gpu.lock"))
    names = [c["name"] for c in doc["checks"]]
    assert "image rehearsal" in names and "image vllm-rocm-seed" not in names


def test_a_campaign_that_does_not_check_is_invalid_input(tmp_path: Path) -> None:
    bad = tmp_path / "camp.yaml"
    bad.write_text("name: camp\nrow: R\ncontrols: [nope]\n")
    result = CliRunner().invoke(doctor, [str(bad)])
    assert getattr(result.exception, "code", None) == 2

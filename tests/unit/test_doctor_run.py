"""run_checks and the probes on this machine: missing tools, fake tool binaries, real paths."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from harness.judge.doctor.checks import any_failed, judge_lock
from harness.measure.host.tools import run_tool
from harness.probe.doctor.allchecks import run_checks
from harness.probe.doctor.hostfacts import free_space, lock_facts

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"
GPU_LINES = {"/dev/kfd", "/dev/dri/renderD*", "device groups", "rocminfo", "amd-smi", "gpu"}


def fake_tool(bindir: Path, name: str, body: str) -> None:
    """A real executable on the search path (not a mock): prints captured output, exits."""
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def empty_path(tmp_path, monkeypatch) -> str:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return str(empty)


def by_name(checks):
    return {c.name: c for c in checks}


def test_run_tool_absent_on_an_empty_path(empty_path):
    run = run_tool(["rocminfo"], search_path=empty_path)
    assert run.found is False and run.returncode is None


def test_run_tool_timeout_is_reported_not_raised(tmp_path):
    fake_tool(tmp_path, "slow", "exec sleep 5\n")
    run = run_tool(["slow"], timeout=0.3, search_path=str(tmp_path))
    assert run.found and run.error == "timed out after 0.3s"


def test_missing_tools_give_fail_lines_on_rocm_and_warn_lines_on_cpu(tmp_path, empty_path):
    kw = {
        "lock_path": tmp_path / "gpu.lock",
        "runs_dir": tmp_path / "runs",
        "images": None,
        "search_path": empty_path,
        "dev": str(tmp_path / "no-dev"),
    }
    rocm = by_name(run_checks(profile="rocm", **kw))
    for name in GPU_LINES:
        assert rocm[name].status == "fail", rocm[name]
    assert "rocminfo not found" in rocm["rocminfo"].detail
    assert "amd-smi not found" in rocm["amd-smi"].detail
    cpu = by_name(run_checks(profile="cpu", **kw))
    for name in GPU_LINES:
        assert cpu[name].status == "warn", cpu[name]
    assert cpu["lock"].status == "ok" and cpu["engine"].status == "ok"
    assert not any_failed(cpu.values())


def test_fake_rocminfo_printing_a_real_capture_is_read(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_tool(bindir, "rocminfo", f"cat '{FIX / 'rocminfo-gfx1100-rx7900xtx.txt'}'\n")
    fake_tool(bindir, "amd-smi", "echo 'AMDSMI error: driver not loaded' >&2\nexit 2\n")
    checks = by_name(
        run_checks(
            lock_path=tmp_path / "gpu.lock",
            runs_dir=tmp_path,
            images=None,
            required_gfx="gfx1100",
            search_path=str(bindir),
        )
    )
    assert checks["rocminfo"].status == "ok"
    assert checks["amd-smi"].status == "warn"
    assert "exited 2: AMDSMI error: driver not loaded" in checks["amd-smi"].detail
    assert checks["gpu"].status == "ok" and "required gfx1100 present" in checks["gpu"].detail
    wrong = by_name(
        run_checks(
            lock_path=tmp_path / "gpu.lock",
            runs_dir=tmp_path,
            images=None,
            required_gfx="gfx942",
            search_path=str(bindir),
        )
    )
    assert wrong["gpu"].status == "fail"


def test_unknown_profile_is_refused(tmp_path):
    with pytest.raises(ValueError, match="profile"):
        run_checks(lock_path=tmp_path / "l", runs_dir=tmp_path, profile="cuda")


def test_lock_facts_never_create_the_lock(tmp_path):
    lock = tmp_path / "gpu.lock"
    facts = lock_facts(lock)
    assert facts["exists"] is False and facts["parent_writable"] is True
    assert not lock.exists()
    lock.write_text("")
    assert lock_facts(lock)["writable"] is True


def test_a_symlinked_lock_file_fails_the_doctor_as_run_refuses_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    lock = tmp_path / "gpu.lock"
    lock.symlink_to(victim)
    check = judge_lock(**lock_facts(lock))
    assert check.status == "fail" and "not a regular file" in check.detail
    dangling = tmp_path / "other.lock"
    dangling.symlink_to(tmp_path / "nowhere")
    assert judge_lock(**lock_facts(dangling)).status == "fail"


def test_free_space_of_a_folder_not_yet_created_is_measured_at_its_ancestor(tmp_path):
    where, free = free_space(tmp_path / "a" / "b")
    assert where == str(tmp_path)
    assert isinstance(free, int) and free > 0


def test_disk_thresholds_reach_the_disk_line(tmp_path):
    huge = 1 << 60
    checks = by_name(
        run_checks(
            lock_path=tmp_path / "l",
            runs_dir=tmp_path,
            images=None,
            profile="cpu",
            warn_free_bytes=huge * 2,
            fail_free_bytes=huge,
        )
    )
    assert checks["disk"].status == "fail"

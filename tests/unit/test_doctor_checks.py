"""The doctor's pure verdicts: facts in, ok/warn/fail lines out."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from harness.judge.doctor.checks import (
    GIB,
    Check,
    DeviceNode,
    any_failed,
    judge_disk,
    judge_engine,
    judge_gpu_tools,
    judge_groups,
    judge_images,
    judge_kfd,
    judge_lock,
    judge_render,
    soften,
)
from harness.measure.host.tools import ToolRun
from harness.measure.imagestore import image_store

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"
ROCMINFO_7900 = (FIX / "rocminfo-gfx1100-rx7900xtx.txt").read_text()
SMI_MI210 = (FIX / "amd-smi-static-mi210-gfx90a.json").read_text()
ID_A = "sha256:" + "a" * 64
ID_B = "sha256:" + "b" * 64
CHR = stat.S_IFCHR


def absent(tool: str) -> ToolRun:
    return ToolRun(tool=tool, found=False)


def ran(tool: str, stdout: str, rc: int = 0, stderr: str = "") -> ToolRun:
    return ToolRun(tool=tool, found=True, returncode=rc, stdout=stdout, stderr=stderr)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


# ----------------------------------------------------------------- GPU tools


def test_both_tools_absent_is_three_clear_fail_lines():
    lines = by_name(judge_gpu_tools(absent("rocminfo"), absent("amd-smi"), None))
    assert lines["rocminfo"].status == "fail"
    assert "rocminfo not found" in lines["rocminfo"].detail
    assert lines["amd-smi"].status == "fail"
    assert lines["gpu"].status == "fail"


def test_one_tool_is_enough_and_the_missing_one_only_warns():
    lines = by_name(judge_gpu_tools(ran("rocminfo", ROCMINFO_7900), absent("amd-smi"), None))
    assert lines["rocminfo"] == Check("rocminfo", "ok", "gfx1100 Radeon RX 7900 XTX 24.0 GiB")
    assert lines["amd-smi"].status == "warn"
    assert lines["gpu"].status == "ok"
    assert "gfx1100" in lines["gpu"].detail and "24.0 GiB" in lines["gpu"].detail


def test_required_gfx_present_is_ok_and_feature_flags_are_ignored():
    lines = by_name(judge_gpu_tools(ran("rocminfo", ROCMINFO_7900), absent("amd-smi"), "gfx1100"))
    assert lines["gpu"].status == "ok"
    lines = by_name(judge_gpu_tools(absent("rocminfo"), ran("amd-smi", SMI_MI210), "gfx90a:xnack-"))
    assert lines["gpu"].status == "ok"


def test_required_gfx_mismatch_fails_and_names_both_targets():
    lines = by_name(judge_gpu_tools(ran("rocminfo", ROCMINFO_7900), absent("amd-smi"), "gfx942"))
    assert lines["gpu"].status == "fail"
    assert "gfx942" in lines["gpu"].detail and "gfx1100" in lines["gpu"].detail


def test_tools_that_disagree_fail():
    lines = by_name(
        judge_gpu_tools(ran("rocminfo", ROCMINFO_7900), ran("amd-smi", SMI_MI210), None)
    )
    assert lines["rocminfo"].status == "ok" and lines["amd-smi"].status == "ok"
    assert lines["gpu"].status == "fail"
    assert "disagree" in lines["gpu"].detail


def test_a_failing_tool_reports_its_exit_code_and_first_message():
    run = ran("rocminfo", "", rc=1, stderr="ROCk module is NOT loaded, possibly no GPU devices\n")
    lines = by_name(judge_gpu_tools(run, absent("amd-smi"), None))
    assert lines["rocminfo"].status == "fail"
    assert lines["rocminfo"].detail == (
        "rocminfo exited 1: ROCk module is NOT loaded, possibly no GPU devices"
    )


def test_timeout_and_unreadable_output_are_fail_lines_not_crashes():
    timed = ToolRun(tool="amd-smi", found=True, error="timed out after 20s")
    lines = by_name(judge_gpu_tools(ran("rocminfo", "garbage"), timed, None))
    assert lines["rocminfo"].status == "fail" and "unreadable" in lines["rocminfo"].detail
    assert lines["amd-smi"].detail == "amd-smi timed out after 20s"
    assert lines["gpu"].status == "fail"


def test_soften_turns_only_fail_into_warn():
    assert soften(Check("gpu", "fail", "x")).status == "warn"
    assert soften(Check("gpu", "ok", "x")).status == "ok"
    assert not any_failed(
        [soften(c) for c in judge_gpu_tools(absent("rocminfo"), absent("amd-smi"), "gfx1100")]
    )


# ----------------------------------------------------------------- Docker


def test_engine_line_says_version_api_and_image_store():
    check = judge_engine(
        {"Version": "27.3.1", "ApiVersion": "1.47"},
        {"Driver": "overlayfs", "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]},
        None,
    )
    assert check.status == "ok"
    assert "API 1.47" in check.detail and "containerd image store" in check.detail
    assert "manifest digest" in check.detail


def test_engine_unreachable_is_a_fail_line():
    check = judge_engine(None, None, "Error while fetching server API version")
    assert check.status == "fail" and "unreachable" in check.detail


@pytest.mark.parametrize(
    ("info", "store"),
    [
        ({"Driver": "overlay2", "DriverStatus": [["Backing Filesystem", "extfs"]]}, "graph-driver"),
        ({"Driver": "fuse-overlayfs", "DriverStatus": None}, "graph-driver"),
        (
            {
                "Driver": "overlayfs",
                "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]],
            },
            "containerd",
        ),
    ],
)
def test_image_store(info, store):
    assert image_store(info) == store


def test_images_present_absent_and_malformed():
    expected = {
        "good": {"id": ID_A},
        "gone": {"id": ID_B, "ref": "app:1"},
        "bad": {"id": "app:latest"},
    }
    lines = by_name(
        judge_images(
            expected,
            {"good": ID_A, "gone": None, "bad": None},
            {"gone": "sha256:" + "c" * 64},
            "graph-driver",
        )
    )
    assert lines["image good"].status == "ok"
    assert lines["image gone"].status == "fail"
    assert "not present locally" in lines["image gone"].detail
    assert "tag app:1 points at sha256:cccc" in lines["image gone"].detail
    assert lines["image bad"].status == "fail" and "not a full sha256" in lines["image bad"].detail


def test_image_locked_on_the_other_store_says_why_the_id_differs():
    [line] = judge_images(
        {"x": {"id": ID_A, "store": "containerd"}}, {"x": None}, {}, "graph-driver"
    )
    assert line.status == "fail"
    assert "locked on a containerd daemon" in line.detail


def test_images_with_no_engine_or_empty_lock():
    assert (
        judge_images({"x": {"id": ID_A}}, {}, {}, None, engine_error="refused")[0].status == "fail"
    )
    assert judge_images({}, {}, {}, "graph-driver") == [
        Check("images", "warn", "images.lock names no images")
    ]


# ----------------------------------------------------------------- devices


def test_kfd_missing_wrong_kind_and_present():
    assert judge_kfd(DeviceNode("/dev/kfd", False)).status == "fail"
    assert judge_kfd(DeviceNode("/dev/kfd", True, mode=stat.S_IFREG | 0o666)).status == "fail"
    ok = judge_kfd(DeviceNode("/dev/kfd", True, mode=CHR | 0o660, gid=44, group="render"))
    assert ok.status == "ok" and "render" in ok.detail


def test_render_nodes():
    assert judge_render([]).status == "fail"
    nodes = [DeviceNode("/dev/dri/renderD128", True, mode=CHR | 0o660, gid=109, group="render")]
    assert judge_render(nodes) == Check("/dev/dri/renderD*", "ok", "1 render node(s): renderD128")


def test_user_outside_the_owning_group_fails_with_the_fix():
    nodes = [
        DeviceNode("/dev/kfd", True, CHR | 0o660, 109, "render"),
        DeviceNode("/dev/dri/renderD128", True, CHR | 0o660, 44, "video"),
    ]
    check = judge_groups(nodes, "alice", 1000, {1000, 44})
    assert check.status == "fail"
    assert "render" in check.detail and "video" not in check.detail.split("owning")[0]
    assert "usermod -aG render alice" in check.detail


def test_user_in_groups_root_or_world_writable_nodes_pass():
    nodes = [DeviceNode("/dev/kfd", True, CHR | 0o660, 109, "render")]
    assert judge_groups(nodes, "alice", 1000, {1000, 109}).status == "ok"
    assert judge_groups(nodes, "root", 0, {0}).status == "ok"
    world = [DeviceNode("/dev/kfd", True, CHR | 0o666, 109, "render")]
    assert judge_groups(world, "bob", 1001, {1001}).status == "ok"
    readonly_group = [DeviceNode("/dev/kfd", True, CHR | 0o640, 109, "render")]
    assert judge_groups(readonly_group, "alice", 1000, {109}).status == "fail"


# ----------------------------------------------------------------- lock and disk


def test_lock_verdicts():
    base = {"path": "/h/gpu.lock", "parent": "/h"}
    assert (
        judge_lock(
            **base,
            exists=True,
            is_file=True,
            writable=True,
            parent_exists=True,
            parent_writable=False,
        ).status
        == "ok"
    )
    assert (
        judge_lock(
            **base,
            exists=True,
            is_file=True,
            writable=False,
            parent_exists=True,
            parent_writable=True,
        ).status
        == "fail"
    )
    assert (
        judge_lock(
            **base,
            exists=True,
            is_file=False,
            writable=True,
            parent_exists=True,
            parent_writable=True,
        ).status
        == "fail"
    )
    assert (
        judge_lock(
            **base,
            exists=False,
            is_file=False,
            writable=False,
            parent_exists=True,
            parent_writable=True,
        ).status
        == "ok"
    )
    assert (
        judge_lock(
            **base,
            exists=False,
            is_file=False,
            writable=False,
            parent_exists=True,
            parent_writable=False,
        ).status
        == "fail"
    )
    assert (
        "does not exist"
        in judge_lock(
            **base,
            exists=False,
            is_file=False,
            writable=False,
            parent_exists=False,
            parent_writable=False,
        ).detail
    )


@pytest.mark.parametrize(
    ("free", "status"),
    [
        (20 * GIB, "ok"),
        (10 * GIB, "ok"),
        (10 * GIB - 1, "warn"),
        (1 * GIB, "warn"),
        (1 * GIB - 1, "fail"),
        (0, "fail"),
        (None, "fail"),
    ],
)
def test_disk_thresholds(free, status):
    assert judge_disk("gpu-runs", free).status == status


def test_disk_thresholds_are_parameters_and_missing_folder_is_said():
    check = judge_disk(
        "gpu-runs", 5 * GIB, warn_bytes=2 * GIB, fail_bytes=6 * GIB, measured_at="/srv"
    )
    assert check.status == "fail"
    assert "not created yet; measured at /srv" in check.detail

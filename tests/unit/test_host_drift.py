"""drift(): every changed field is named; timestamps and uptime are not changes."""

from __future__ import annotations

import copy

from harness.measure.host.identity import drift

BEFORE = {
    "schema": "harness.host/v1",
    "taken_at": "2026-11-30T08:00:00.000000Z",
    "uptime_s": 100.0,
    "boot_id": "b-1",
    "kernel": {"release": "6.8.0-45-generic", "machine": "x86_64"},
    "driver": {"amdgpu_module_version": "6.10.5", "rocm_version": "6.4.1"},
    "gpu": {
        "rocminfo": {"gpus": [{"gfx_target": "gfx1100", "vram_bytes": 25753026560}]},
        "amd_smi": {"absent": "amd-smi not found"},
    },
    "firmware": {"card0": {"vbios_version": "113-D70401-00", "fw": {"mec": "0x000001f0"}}},
}


def after(**changes):
    snap = copy.deepcopy(BEFORE)
    for path, value in changes.items():
        node = snap
        *parents, leaf = path.split("__")
        for key in parents:
            node = node[key]
        if value is KeyError:
            del node[leaf]
        else:
            node[leaf] = value
    return snap


def test_identical_snapshots_have_no_drift():
    assert drift(BEFORE, copy.deepcopy(BEFORE)) == []


def test_timestamps_and_uptime_are_ignored():
    assert drift(BEFORE, after(taken_at="2026-11-30T09:00:00Z", uptime_s=4000.5)) == []


def test_a_kernel_change_is_named_with_both_values():
    assert drift(BEFORE, after(kernel__release="6.8.0-47-generic")) == [
        "kernel.release: '6.8.0-45-generic' -> '6.8.0-47-generic'"
    ]


def test_reboot_firmware_and_gpu_changes_are_all_named_sorted():
    changed = after(boot_id="b-2", firmware__card0__fw__mec="0x000001f2")
    changed["gpu"]["rocminfo"]["gpus"][0]["vram_bytes"] = 1
    assert [line.split(":")[0] for line in drift(BEFORE, changed)] == [
        "boot_id",
        "firmware.card0.fw.mec",
        "gpu.rocminfo.gpus[0].vram_bytes",
    ]


def test_fields_that_appear_or_vanish_are_named():
    lines = drift(BEFORE, after(driver__amdgpu_module_version=KeyError, driver__extra="x"))
    assert lines == [
        "driver.amdgpu_module_version: '6.10.5' -> <absent>",
        "driver.extra: <absent> -> 'x'",
    ]


def test_a_tool_becoming_absent_is_drift():
    changed = after(gpu__rocminfo={"absent": "rocminfo timed out after 20s"})
    names = [line.split(":")[0] for line in drift(BEFORE, changed)]
    assert "gpu.rocminfo.absent" in names
    assert "gpu.rocminfo.gpus[0].gfx_target" in names


def test_a_type_change_with_an_equal_value_is_drift():
    assert drift({"a": 1}, {"a": 1.0}) == ["a: 1 -> 1.0"]
    assert drift({"a": [1, 2]}, {"a": [1, 2, 3]}) == ["a[2]: <absent> -> 3"]
    assert drift({"a": {}}, {"a": {"b": 1}}) == ["a: {} -> <absent>", "a.b: <absent> -> 1"]


def test_volatile_keys_are_ignored_at_any_depth_and_can_be_overridden():
    a = {"docker": {"taken_at": "x", "version": "27"}}
    b = {"docker": {"taken_at": "y", "version": "27"}}
    assert drift(a, b) == []
    assert drift(a, b, ignore=()) == ["docker.taken_at: 'x' -> 'y'"]



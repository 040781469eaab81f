"""snapshot() on a relocated root with fake sysfs files and a fake rocminfo binary."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from harness.base.atomic import dumps_json
from harness.measure.host.identity import drift, firmware, parse_os_release, snapshot

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_root(tmp_path) -> Path:
    root = tmp_path / "root"
    write(root / "proc/sys/kernel/random/boot_id", "0d3a1c5e-1111-2222-3333-444455556666\n")
    write(root / "proc/uptime", "12345.67 23456.78\n")
    write(root / "etc/os-release", 'NAME="Ubuntu"\nVERSION_ID="24.04"\n# comment\nID=ubuntu\n')
    write(root / "sys/module/amdgpu/version", "6.10.5\n")
    write(root / "opt/rocm/.info/version", "6.4.1-120\n")
    pci = root / "sys/devices/pci0000:00/0000:03:00.0"
    write(pci / "vbios_version", "113-D70401-00\n")
    write(pci / "fw_version/mec_fw_version", "0x000001f0\n")
    write(pci / "fw_version/sos_fw_version", "0x00270080\n")
    (root / "sys/bus/pci/drivers/amdgpu").mkdir(parents=True)
    os.symlink(root / "sys/bus/pci/drivers/amdgpu", pci / "driver")
    (root / "sys/class/drm/card0").mkdir(parents=True)
    os.symlink(pci, root / "sys/class/drm/card0/device")
    (root / "sys/class/drm/card0-DP-1").mkdir()
    return root


@pytest.fixture
def rocm_bin(tmp_path) -> str:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "rocminfo"
    tool.write_text(f"#!/bin/sh\ncat '{FIX / 'rocminfo-gfx1100-rx7900xtx.txt'}'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(bindir)


def test_snapshot_records_host_driver_gpu_and_firmware(fake_root, rocm_bin):
    snap = snapshot(root=fake_root, search_path=rocm_bin)
    assert snap["schema"] == "harness.host/v1"
    assert snap["boot_id"] == "0d3a1c5e-1111-2222-3333-444455556666"
    assert snap["uptime_s"] == 12345.67
    assert snap["kernel"]["release"] == os.uname().release
    assert snap["os_release"] == {"NAME": "Ubuntu", "VERSION_ID": "24.04", "ID": "ubuntu"}
    assert snap["driver"] == {
        "amdgpu_module_version": "6.10.5",
        "amdgpu_srcversion": None,
        "rocm_version": "6.4.1-120",
    }
    [gpu] = snap["gpu"]["rocminfo"]["gpus"]
    assert gpu["gfx_target"] == "gfx1100" and gpu["marketing_name"] == "Radeon RX 7900 XTX"
    assert "amd-smi not found" in snap["gpu"]["amd_smi"]["absent"]
    assert snap["firmware"] == {
        "card0": {
            "pci": "0000:03:00.0",
            "vbios_version": "113-D70401-00",
            "fw": {"mec": "0x000001f0", "sos": "0x00270080"},
        }
    }
    # the real engine is always there on these machines
    assert snap["docker"]["api_version"] and snap["docker"]["image_store"] in (
        "containerd",
        "graph-driver",
    )
    json.loads(dumps_json(snap))  # evidence-ready: plain JSON, no NaN


def test_two_snapshots_of_an_unchanged_host_do_not_drift(fake_root, rocm_bin):
    first = snapshot(root=fake_root, search_path=rocm_bin)
    write(fake_root / "proc/uptime", "12400.00 23456.78\n")
    assert drift(first, snapshot(root=fake_root, search_path=rocm_bin)) == []


def test_a_firmware_update_between_snapshots_is_drift(fake_root, rocm_bin):
    first = snapshot(root=fake_root, search_path=rocm_bin)
    write(
        fake_root / "sys/devices/pci0000:00/0000:03:00.0/fw_version/mec_fw_version", "0x000001f2\n"
    )
    assert drift(first, snapshot(root=fake_root, search_path=rocm_bin)) == [
        "firmware.card0.fw.mec: '0x000001f0' -> '0x000001f2'"
    ]


def test_absent_files_and_tools_are_recorded_as_absent(tmp_path):
    snap = snapshot(root=tmp_path / "nothing", search_path=str(tmp_path))
    assert snap["boot_id"] is None and snap["os_release"] is None
    assert snap["driver"] == {
        "amdgpu_module_version": None,
        "amdgpu_srcversion": None,
        "rocm_version": None,
    }
    assert set(snap["gpu"]["rocminfo"]) == {"absent"}
    assert snap["firmware"] == {}


def test_non_amdgpu_cards_are_not_firmware_sources(fake_root):
    other = fake_root / "sys/devices/pci0000:00/0000:05:00.0"
    (fake_root / "sys/bus/pci/drivers/i915").mkdir(parents=True)
    other.mkdir(parents=True)
    os.symlink(fake_root / "sys/bus/pci/drivers/i915", other / "driver")
    (fake_root / "sys/class/drm/card1").mkdir()
    os.symlink(other, fake_root / "sys/class/drm/card1/device")
    assert list(firmware(fake_root)) == ["card0"]


def test_parse_os_release():
    assert parse_os_release(None) is None
    assert parse_os_release("ID=debian\nPRETTY_NAME='Debian 12'\n\nbad line\n") == {
        "ID": "debian",
        "PRETTY_NAME": "Debian 12",
    }

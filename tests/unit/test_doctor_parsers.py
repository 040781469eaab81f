"""The ROCm tool parsers on real captured outputs (tests/fixtures/rocm/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.measure.host.parsers import (
    ParseError,
    base_gfx,
    gib,
    parse_amd_smi_static,
    parse_rocminfo,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"
KIB = 1024


def fixture(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_rocminfo_rx7900xtx_gives_gfx1100_and_its_vram():
    report = parse_rocminfo(fixture("rocminfo-gfx1100-rx7900xtx.txt"))
    assert report.runtime_version == "1.1"
    assert report.kernel_module == "loaded"
    assert len(report.gpus) == 1  # the Ryzen CPU agent is not a GPU
    gpu = report.gpus[0]
    assert gpu.gfx_target == "gfx1100"
    assert gpu.marketing_name == "Radeon RX 7900 XTX"
    assert gpu.uuid == "GPU-af80fc06fd8c76ab"
    assert gpu.vram_bytes == 25149440 * KIB
    assert gib(gpu.vram_bytes) == "24.0 GiB"
    assert gpu.compute_units == 96
    assert gpu.chip_id == "0x744c"
    assert gpu.node == 1
    assert gpu.isa == ["amdgcn-amd-amdhsa--gfx1100"]


def test_rocminfo_mi300x_vf_gives_gfx942_with_feature_flags_kept_in_isa():
    report = parse_rocminfo(fixture("rocminfo-gfx942-mi300x-vf.txt"))
    assert report.runtime_version == "1.18"
    assert report.kernel_module == "6.16.13"
    [gpu] = report.gpus
    assert gpu.gfx_target == "gfx942"
    assert gpu.marketing_name == "AMD Instinct MI300X VF"
    assert gpu.vram_bytes == 200998912 * KIB
    assert gpu.compute_units == 304
    assert gpu.chip_id == "0x74b5"
    assert gpu.isa[0] == "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
    assert len(gpu.isa) == 2


@pytest.mark.parametrize(
    "name", ["rocminfo-gfx1100-rx7900xtx.txt", "rocminfo-gfx942-mi300x-vf.txt"]
)
def test_rocminfo_padding_and_tab_indentation_do_not_change_the_result(name):
    # rocminfo pads many lines with trailing spaces and some pastes use tabs: both must parse alike.
    text = fixture(name)
    padded = "\n".join(line + " " * 20 for line in text.splitlines())
    tabbed = "\n".join(line.replace("  ", "\t") for line in text.splitlines())
    assert parse_rocminfo(padded) == parse_rocminfo(text)
    assert parse_rocminfo(tabbed) == parse_rocminfo(text)


def test_rocminfo_name_without_gfx_falls_back_to_the_isa_name():
    text = fixture("rocminfo-gfx1100-rx7900xtx.txt").replace(
        "  Name:                    gfx1100", "  Name:                    something-else"
    )
    assert parse_rocminfo(text).gpus[0].gfx_target == "gfx1100"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ROCk module is NOT loaded, possibly no GPU devices\n",
        "hsa api call failure at: rocminfo.cc:1306\n",
    ],
)
def test_rocminfo_without_agent_list_is_a_parse_error(text):
    with pytest.raises(ParseError, match="not rocminfo output"):
        parse_rocminfo(text)


def test_amd_smi_static_mi210():
    [gpu] = parse_amd_smi_static(fixture("amd-smi-static-mi210-gfx90a.json"))
    assert gpu.index == 0
    assert gpu.market_name == "AMD Instinct MI210"
    assert gpu.gfx_target == "gfx90a"
    assert gpu.device_id == "0x740f"
    assert gpu.vram_bytes == 65520 * 1024**2
    assert gpu.vram_type == "HBM"
    assert gpu.driver_name == "amdgpu"
    assert gpu.driver_version.startswith("Linuxversion6.14.0-24-generic")
    # this capture has no vbios version, no bdf and "N/A" board fields: absent, not "N/A"
    assert gpu.vbios_version is None
    assert gpu.bdf is None
    assert gpu.board_product_name is None


def test_amd_smi_static_older_bare_list_form_parses_the_same():
    # amd-smi before the gpu_data wrapper printed the list itself.
    data = json.loads(fixture("amd-smi-static-mi210-gfx90a.json"))
    bare = json.dumps(data["gpu_data"])
    assert parse_amd_smi_static(bare) == parse_amd_smi_static(
        fixture("amd-smi-static-mi210-gfx90a.json")
    )


def test_amd_smi_static_tolerates_python_warnings_before_the_json():
    # The two warning lines amd-smi printed on Python 3.14 (nathaninline/ajean issue #39).
    noise = (
        "/usr/lib/python3.14/site-packages/amdsmi/amdsmi_interface.py:3569: SyntaxWarning: "
        "'return' in a 'finally' block\n  return return_dictionary\n"
    )
    text = noise + fixture("amd-smi-static-mi210-gfx90a.json")
    assert parse_amd_smi_static(text)[0].gfx_target == "gfx90a"


@pytest.mark.parametrize("text", ["", "not json", '"a string"', '{"gpu_data": 3}', "[1, 2]"])
def test_amd_smi_static_rejects_what_is_not_a_gpu_list(text):
    with pytest.raises(ParseError):
        parse_amd_smi_static(text)


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ({"value": 24560, "unit": "MB"}, 24560 * 1024**2),
        ("20480 MB", 20480 * 1024**2),
        ({"value": 192, "unit": "GB"}, 192 * 1024**3),
        ({"value": "N/A", "unit": "MB"}, None),
        ("N/A", None),
    ],
)
def test_amd_smi_vram_size_forms(size, expected):
    data = json.loads(fixture("amd-smi-static-mi210-gfx90a.json"))
    data["gpu_data"][0]["vram"]["size"] = size
    assert parse_amd_smi_static(json.dumps(data))[0].vram_bytes == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("gfx1100", "gfx1100"),
        ("gfx942:sramecc+:xnack-", "gfx942"),
        ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", "gfx90a"),
        ("amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-", "gfx9-4-generic"),
        ("GFX1100", "gfx1100"),
        ("AMD Ryzen 5 5500", None),
        ("N/A", None),
        (None, None),
    ],
)
def test_base_gfx(raw, expected):
    assert base_gfx(raw) == expected

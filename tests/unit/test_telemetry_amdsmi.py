"""The `rocm` telemetry source (harness/measure/telemetry/amdsmi.py) on real amd-smi
outputs (tests/fixtures/amdsmi/, SOURCES.md names where each was posted, on which GPU and
version): each parses to the figures it shows, N/A is None and is filled from the card's
hwmon files, hostile output is None or a clear AmdSmiError, and `AmdSmi.read` runs a
stand-in `amd-smi` (a small script printing a fixture: this machine has no AMD GPU) with a
timeout, a bounded output and a clear error when the tool is missing."""

from __future__ import annotations

import copy
import json
import math
import os
import stat
import time
from pathlib import Path

import pytest

from harness.measure.telemetry import amdsmi
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry.amdsmi import (
    GPU_QUANTITIES,
    AmdSmi,
    AmdSmiError,
    AmdSmiNotFound,
    card_devices,
    figures,
    gpu_entries,
    hwmon,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "amdsmi"
RX6600 = "metric-rx6600-gfx1032.json"
ROCM61_POWER = "metric-power-rocm6.1.0-changelog.json"
MI300X = "metric-mi300x-rocm7.0.2-excerpt.json"
MIB = 1024 * 1024
RX6600_BDF = "0000:0b:00.0"  # the RX 6600's bus id, from its amd-smi static on the same page

# The RX 6600's figures as its `amd-smi metric --json` shows them (MB is MiB).
RX6600_FIGURES = {
    q.POWER_W: 6.0, q.TEMPERATURE_C: 36.0, q.HOTSPOT_C: 37.0, q.GFX_CLOCK_MHZ: 800.0,
    q.MEMORY_CLOCK_MHZ: 541.0, q.VRAM_USED_BYTES: 202.0 * MIB,
    q.VRAM_TOTAL_BYTES: 8176.0 * MIB, q.GFX_UTIL_PCT: 1.0, q.MEMORY_UTIL_PCT: 0.0,
}


def text_of(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def rx6600() -> list[dict]:
    return json.loads(text_of(RX6600))


def only_none_or_error(text: object) -> dict | None:
    """What `figures` makes of hostile text: its figures, or None when it said
    AmdSmiError. Any other exception fails the test that calls it."""
    try:
        return figures(text)  # type: ignore[arg-type]
    except AmdSmiError as e:
        assert e.message and "Traceback" not in e.message
        return None


# --------------------------------------------------------------------------- fixtures


def test_the_rx6600_output_gives_every_figure_it_shows() -> None:
    assert figures(text_of(RX6600)) == {"gpu0": RX6600_FIGURES}


def test_the_rocm61_power_section_gives_its_socket_power_and_nothing_else() -> None:
    got = figures(text_of(ROCM61_POWER))
    assert list(got) == ["gpu0"]
    assert got["gpu0"][q.POWER_W] == 10.0
    assert {k for k, v in got["gpu0"].items() if v is None} == set(GPU_QUANTITIES) - {q.POWER_W}


def test_the_mi300x_rocm7_output_unwraps_gpu_data_and_keeps_edge_na() -> None:
    got = figures(text_of(MI300X))["gpu0"]
    assert got[q.POWER_W] == 158.0
    assert got[q.HOTSPOT_C] == 45.0
    assert got[q.GFX_UTIL_PCT] == 0.0 and got[q.MEMORY_UTIL_PCT] == 0.0
    assert got[q.TEMPERATURE_C] is None  # "edge": "N/A" on the MI300X
    assert got[q.VRAM_USED_BYTES] is None  # the excerpt has no mem_usage


def test_every_source_has_every_gpu_quantity() -> None:
    for name in (RX6600, ROCM61_POWER, MI300X):
        for values in figures(text_of(name)).values():
            assert set(values) == set(GPU_QUANTITIES) <= q.QUANTITIES


def test_the_rocm7_wrapper_reads_as_the_bare_list() -> None:
    """ROCm 7 wraps the list in {"gpu_data": [...]} (nathaninline/ajean#39 on an RX 7800
    XT): the RX 6600's entries wrapped so read the same."""
    wrapped = json.dumps({"gpu_data": rx6600()}, indent=4)
    assert figures(wrapped) == {"gpu0": RX6600_FIGURES}


def test_rocm60_key_names_and_bare_numbers_read_the_same() -> None:
    """ROCm 6.0's CLI printed bare numbers under other names (amdsmi_cli/amdsmi_commands.py
    on ROCm/amdsmi's rocm-6.0.x branch): the RX 6600's readings in that shape."""
    entry = {
        "gpu": 0,
        "usage": {"gfx_usage": 1, "mem_usage": 0, "mm_ip_usage": 0},
        "power": {"current_power": 6, "current_gfx_voltage": "N/A",
                  "power_management": "ENABLED", "throttle_status": "UNTHROTTLED"},
        "clock": {"gfx": {"cur_clk": 800, "max_clk": 2750, "min_clk": 500, "sleep_clk": "N/A"},
                  "mem": {"cur_clk": 541, "max_clk": 875, "min_clk": 96, "sleep_clk": "N/A"}},
        "temperature": {"edge": 36, "hotspot": 37, "mem": 32},
        "mem_usage": {"total_vram": 8176, "used_vram": 202, "free_vram": 7974},
    }
    assert figures(json.dumps([entry])) == {"gpu0": RX6600_FIGURES}


def test_two_gpus_are_named_by_amd_smis_own_index() -> None:
    first, second = rx6600()[0], copy.deepcopy(rx6600()[0])
    second["gpu"] = 3
    second["power"]["socket_power"]["value"] = 250
    got = figures(json.dumps([first, second]))
    assert list(got) == ["gpu0", "gpu3"]
    assert got["gpu3"][q.POWER_W] == 250.0 and got["gpu0"][q.POWER_W] == 6.0


# --------------------------------------------------------------------------- units and N/A


@pytest.mark.parametrize(("reading", "watts"), [
    ({"value": 6000, "unit": "mW"}, 6.0),
    ({"value": 6000000, "unit": "uW"}, 6.0),
    ({"value": 6000000, "unit": "µW"}, 6.0),
    ({"value": 6.5, "unit": "W"}, 6.5),
    ("6 W", 6.0),
    ("6000000 µW", 6.0),
    (6, 6.0),  # a bare number is in amd-smi's unit for it
    ({"value": 6}, 6.0),
    ({"value": 6, "unit": "kg"}, None),  # a unit power is never in
    ({"value": "N/A", "unit": "W"}, None),
    ("N/A", None),
])
def test_power_is_converted_only_where_a_unit_says_so(reading, watts) -> None:
    doc = rx6600()
    doc[0]["power"]["socket_power"] = reading
    assert figures(json.dumps(doc))["gpu0"][q.POWER_W] == watts


@pytest.mark.parametrize(("reading", "nbytes"), [
    ({"value": 2, "unit": "GB"}, 2 * 1024 * MIB),
    ({"value": 2, "unit": "GiB"}, 2 * 1024 * MIB),
    ({"value": 512, "unit": "KB"}, 512 * 1024),
    ({"value": 202, "unit": "MiB"}, 202 * MIB),
    ({"value": 202, "unit": "MB"}, 202 * MIB),  # amd-smi's MB is MiB
    ("202 MB", 202 * MIB),
])
def test_vram_units_are_binary(reading, nbytes) -> None:
    doc = rx6600()
    doc[0]["mem_usage"]["used_vram"] = reading
    assert figures(json.dumps(doc))["gpu0"][q.VRAM_USED_BYTES] == nbytes


def test_a_reading_given_as_na_is_none_and_the_rest_stay() -> None:
    doc = rx6600()
    doc[0]["temperature"]["edge"] = "N/A"
    doc[0]["clock"]["gfx_0"]["clk"] = "N/A"
    doc[0]["power"] = "N/A"  # a whole section amd-smi could not read
    got = figures(json.dumps(doc))["gpu0"]
    assert got[q.TEMPERATURE_C] is None and got[q.GFX_CLOCK_MHZ] is None
    assert got[q.POWER_W] is None
    assert got[q.HOTSPOT_C] == 37.0 and got[q.MEMORY_CLOCK_MHZ] == 541.0


def test_a_second_spelling_of_power_is_used_when_the_first_is_na() -> None:
    """MI200 gives average socket power and current as N/A (ROCm/pytorch#1457)."""
    doc = rx6600()
    doc[0]["power"] = {"socket_power": "N/A", "average_socket_power": {"value": 94, "unit": "W"}}
    assert figures(json.dumps(doc))["gpu0"][q.POWER_W] == 94.0


# --------------------------------------------------------------------------- hostile text


@pytest.mark.parametrize("reading", [
    float("nan"), float("inf"), -500, 10**6, 65535, True, [6], {"value": [6]}, {"value": {}},
    {"value": 6, "unit": 7}, {"value": 6, "unit": "W" * 50}, "6" * 100, "six W", None, "",
])
def test_odd_readings_are_none(reading) -> None:
    doc = rx6600()
    doc[0]["power"]["socket_power"] = reading
    doc[0]["temperature"]["edge"] = reading
    text = json.dumps(doc, allow_nan=True)
    got = figures(text)["gpu0"]
    assert got[q.POWER_W] is None and got[q.TEMPERATURE_C] is None
    assert got[q.HOTSPOT_C] == 37.0


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_non_finite_json_numbers_are_none(literal) -> None:
    text = text_of(RX6600).replace('"value": 6,', f'"value": {literal},', 1)
    assert literal in text
    assert figures(text)["gpu0"][q.POWER_W] is None


@pytest.mark.parametrize("text", [
    "", "not json", "{", "[", "null", "7", '"N/A"', '{"foo": 1}', '{"gpu_data": "N/A"}',
    "[" * 100_000, "[" + "1" * 5000 + "]", "\x00\x01", "'CTRL' + 'C' to stop watching output:",
])
def test_unreadable_output_is_a_clear_error(text) -> None:
    assert only_none_or_error(text) is None


def test_ten_mib_of_output_is_refused_before_parsing() -> None:
    text = "[" + " " * (10 * MIB) + "]"
    with pytest.raises(AmdSmiError, match="bound"):
        figures(text)


def test_bytes_are_not_text() -> None:
    with pytest.raises(AmdSmiError, match="not text"):
        figures(b"[]")  # type: ignore[arg-type]


@pytest.mark.parametrize("entries", [
    [1, "x", None, []],
    [{"gpu": "0"}, {"gpu": -1}, {"gpu": True}, {"gpu": 1.5}, {"gpu": 10**6}, {}],
])
def test_entries_without_a_whole_gpu_index_are_left_out(entries) -> None:
    assert figures(json.dumps(entries)) == {}


def test_a_repeated_index_keeps_the_first_entry() -> None:
    first, again = rx6600()[0], copy.deepcopy(rx6600()[0])
    again["power"]["socket_power"]["value"] = 99
    assert figures(json.dumps([first, again]))["gpu0"][q.POWER_W] == 6.0


def test_at_most_max_gpus_are_read() -> None:
    entries = [{"gpu": i} for i in range(amdsmi.MAX_GPUS + 10)]
    assert len(figures(json.dumps(entries))) == amdsmi.MAX_GPUS


def test_unknown_keys_are_ignored() -> None:
    doc = rx6600()
    doc[0]["future_section"] = {"socket_power": {"value": 1, "unit": "W"}}
    doc[0]["power"]["new_field"] = [1, 2, {"x": None}]
    assert figures(json.dumps(doc)) == {"gpu0": RX6600_FIGURES}


# --------------------------------------------------------------------------- hwmon


def fake_card(root: Path, *, bdf: str = RX6600_BDF, card: str = "card0",
              hwmon_files: dict[str, str] | None = None,
              device_files: dict[str, str] | None = None) -> Path:
    """A sysfs card as the kernel lays it out: /sys/class/drm/cardN/device a link to the
    PCI device, its hwmon/hwmonN folder beside its own attributes. The values are the RX
    6600's own (its amdsmi_get_gpu_metrics_info on the same page: 4 W average socket
    power, edge and hotspot 37 C, gfx clock 700 MHz, memory clock 96 MHz; its amd-smi
    metric: 202 of 8176 MiB used), in the kernel's formats (amdgpu_pm.c "DOC: hwmon":
    microwatts, millidegrees, hertz, one integer and a newline)."""
    device = root / "devices" / "pci0000:00" / bdf
    mon = device / "hwmon" / "hwmon3"
    mon.mkdir(parents=True)
    files = {"name": "amdgpu\n", "power1_average": "4000000\n", "power1_input": "5000000\n",
             "temp1_input": "37000\n", "temp2_input": "37000\n",
             "freq1_input": "700000000\n", "freq2_input": "96000000\n"}
    files.update(hwmon_files or {})
    for name, text in files.items():
        if text is not None:
            (mon / name).write_text(text)
    attrs = {"mem_info_vram_used": f"{202 * MIB}\n", "mem_info_vram_total": f"{8176 * MIB}\n",
             "gpu_busy_percent": "0\n", "mem_busy_percent": "3\n"}
    attrs.update(device_files or {})
    for name, text in attrs.items():
        if text is not None:
            (device / name).write_text(text)
    drm = root / "class" / "drm" / card
    drm.mkdir(parents=True)
    (drm / "device").symlink_to(os.path.relpath(device, drm))
    return drm / "device"


KERNEL_FIGURES = {
    q.POWER_W: 4.0, q.TEMPERATURE_C: 37.0, q.HOTSPOT_C: 37.0, q.GFX_CLOCK_MHZ: 700.0,
    q.MEMORY_CLOCK_MHZ: 96.0, q.VRAM_USED_BYTES: 202.0 * MIB, q.VRAM_TOTAL_BYTES: 8176.0 * MIB,
    q.GFX_UTIL_PCT: 0.0, q.MEMORY_UTIL_PCT: 3.0,
}


def test_hwmon_reads_each_figure_in_its_kernel_unit(tmp_path) -> None:
    assert hwmon(fake_card(tmp_path)) == KERNEL_FIGURES


def test_hwmon_takes_power1_input_where_there_is_no_average(tmp_path) -> None:
    """Newer kernels name instantaneous power power1_input, and some cards have no
    power1_average (amdgpu_pm.c, "power1_input: instantaneous power used by the SoC")."""
    device = fake_card(tmp_path, hwmon_files={"power1_average": None})
    assert hwmon(device)[q.POWER_W] == 5.0


@pytest.mark.parametrize("text", ["", "\n", "N/A\n", "-4000000\n", "4e6\n", "1" * 40, "0x10\n"])
def test_hwmon_garbage_is_none(tmp_path, text) -> None:
    device = fake_card(tmp_path, hwmon_files={"power1_average": text, "power1_input": None})
    got = hwmon(device)
    assert got[q.POWER_W] is None
    assert got[q.TEMPERATURE_C] == 37.0


def test_hwmon_refuses_a_symlinked_attribute_and_a_fifo(tmp_path) -> None:
    device = fake_card(tmp_path, hwmon_files={"temp1_input": None, "temp2_input": None})
    secret = tmp_path / "secret"
    secret.write_text("99000\n")
    mon = device / "hwmon" / "hwmon3"
    (mon / "temp1_input").symlink_to(secret)
    os.mkfifo(mon / "temp2_input")  # opened non-blocking and refused, never waited on
    got = hwmon(device)
    assert got[q.TEMPERATURE_C] is None and got[q.HOTSPOT_C] is None


def test_hwmon_refuses_an_attribute_past_one_page(tmp_path) -> None:
    device = fake_card(tmp_path, device_files={"gpu_busy_percent": "1" * 5000})
    assert hwmon(device)[q.GFX_UTIL_PCT] is None


def test_hwmon_prefers_the_folder_named_amdgpu(tmp_path) -> None:
    device = fake_card(tmp_path)
    other = device / "hwmon" / "hwmon1"
    other.mkdir()
    (other / "name").write_text("nvme\n")
    (other / "temp1_input").write_text("80000\n")
    assert hwmon(device)[q.TEMPERATURE_C] == 37.0


def test_hwmon_of_a_card_with_no_hwmon_or_none_at_all(tmp_path) -> None:
    device = fake_card(tmp_path)
    for item in (device / "hwmon" / "hwmon3").iterdir():
        item.unlink()
    (device / "hwmon" / "hwmon3").rmdir()
    got = hwmon(device)
    assert got[q.POWER_W] is None and got[q.VRAM_USED_BYTES] == 202.0 * MIB
    assert set(hwmon(tmp_path / "no-such-card").values()) == {None}


def test_cards_are_found_by_the_bus_id_of_their_device_link(tmp_path) -> None:
    first = fake_card(tmp_path)
    second = fake_card(tmp_path, bdf="0000:C3:00.0", card="card1")
    drm = tmp_path / "class" / "drm"
    (drm / "renderD128").mkdir()  # render nodes and connectors are not cards
    (drm / "card0-DP-1").mkdir()
    (drm / "card7").mkdir()
    (drm / "card7" / "device").mkdir()  # not a link: no bus id to read
    assert card_devices(drm) == {RX6600_BDF: first, "0000:c3:00.0": second}
    assert card_devices(tmp_path / "missing") == {}


# --------------------------------------------------------------------------- AmdSmi.read


def tool(tmp_path: Path, body: str, name: str = "fake-amd-smi") -> Path:
    """A stand-in amd-smi: a shell script (this machine has no AMD GPU)."""
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def printing(tmp_path: Path, fixture: str, name: str = "fake-amd-smi") -> Path:
    return tool(tmp_path, f"cat '{FIXTURES / fixture}'", name)


def test_read_runs_the_command_and_keeps_the_gpus_asked_for(tmp_path) -> None:
    cmd = (str(printing(tmp_path, RX6600)),)
    assert AmdSmi(None, command=cmd).read() == {"gpu0": RX6600_FIGURES}
    assert AmdSmi((0,), command=cmd).read() == {"gpu0": RX6600_FIGURES}
    assert AmdSmi((1,), command=cmd).read() == {}
    assert AmdSmi(None).name == "amd-smi"


def test_the_default_command_is_found_on_path(tmp_path, monkeypatch) -> None:
    body = f'[ "$1" = metric ] && [ "$2" = --json ] && cat \'{FIXTURES / RX6600}\''
    script = tool(tmp_path, body, name="amd-smi")
    monkeypatch.setenv("PATH", os.pathsep.join([str(script.parent), os.environ["PATH"]]))
    assert AmdSmi(None, sysfs=tmp_path).read() == {"gpu0": RX6600_FIGURES}


def test_na_figures_are_filled_from_the_matching_cards_hwmon(tmp_path) -> None:
    """The MI300X excerpt gives edge temperature, clocks and VRAM as N/A or not at all;
    the card `amd-smi list --json` names by bus id fills them, amd-smi's own readings
    (158 W, hotspot 45 C) stay."""
    fake_card(tmp_path, card="card1")
    listing = tool(tmp_path, f"echo '[{{\"gpu\": 0, \"bdf\": \"{RX6600_BDF}\"}}]'", "list")
    got = AmdSmi(None, command=(str(printing(tmp_path, MI300X)),),
                 list_command=(str(listing),), sysfs=tmp_path / "class" / "drm").read()
    assert got["gpu0"] == {**KERNEL_FIGURES, q.POWER_W: 158.0, q.HOTSPOT_C: 45.0,
                           q.GFX_UTIL_PCT: 0.0, q.MEMORY_UTIL_PCT: 0.0}


def test_each_gpu_is_filled_from_its_own_card_not_the_card_of_its_number(tmp_path) -> None:
    """amd-smi's GPU 0 is DRM card1 here and GPU 1 is card0: the bus id decides."""
    fake_card(tmp_path, card="card0", hwmon_files={"temp1_input": "30000\n"})
    fake_card(tmp_path, bdf="0000:c3:00.0", card="card1",
              hwmon_files={"temp1_input": "60000\n"})
    doc = json.loads(text_of(MI300X))
    second = copy.deepcopy(doc["gpu_data"][0])
    second["gpu"] = 1
    doc["gpu_data"].append(second)
    metric = tmp_path / "metric.json"
    metric.write_text(json.dumps(doc))
    listing = tool(tmp_path, "echo '[{\"gpu\": 0, \"bdf\": \"0000:c3:00.0\"}, "
                             f"{{\"gpu\": 1, \"bdf\": \"{RX6600_BDF}\"}}]'", "list")
    got = AmdSmi(None, command=(str(tool(tmp_path, f"cat '{metric}'")),),
                 list_command=(str(listing),), sysfs=tmp_path / "class" / "drm").read()
    assert got["gpu0"][q.TEMPERATURE_C] == 60.0 and got["gpu1"][q.TEMPERATURE_C] == 30.0


def test_a_bus_id_in_the_metric_entry_needs_no_list(tmp_path) -> None:
    fake_card(tmp_path)
    doc = json.loads(text_of(MI300X))
    doc["gpu_data"][0]["bdf"] = RX6600_BDF
    metric = tmp_path / "metric.json"
    metric.write_text(json.dumps(doc))
    got = AmdSmi(None, command=(str(tool(tmp_path, f"cat '{metric}'")),), list_command=None,
                 sysfs=tmp_path / "class" / "drm").read()
    assert got["gpu0"][q.TEMPERATURE_C] == 37.0 and got["gpu0"][q.POWER_W] == 158.0


def test_without_a_bus_id_match_na_stays_na_and_list_is_asked_once(tmp_path) -> None:
    fake_card(tmp_path, bdf="0000:c3:00.0")
    count = tmp_path / "count"
    listing = tool(tmp_path, f"echo x >> '{count}'; echo 'Error: no GPU'; exit 3", "list")
    source = AmdSmi(None, command=(str(printing(tmp_path, MI300X)),),
                    list_command=(str(listing),), sysfs=tmp_path / "class" / "drm")
    for _ in range(3):
        assert source.read()["gpu0"][q.TEMPERATURE_C] is None
    assert count.read_text().count("x") == 1
    named = tool(tmp_path, f"echo '[{{\"gpu\": 0, \"bdf\": \"{RX6600_BDF}\"}}]'", "list2")
    other = AmdSmi(None, command=(str(printing(tmp_path, MI300X)),),
                   list_command=(str(named),), sysfs=tmp_path / "class" / "drm")
    assert other.read()["gpu0"][q.TEMPERATURE_C] is None  # 0000:0b:00.0 is no card here


def test_a_complete_output_asks_nothing_more(tmp_path) -> None:
    count = tmp_path / "count"
    listing = tool(tmp_path, f"echo x >> '{count}'", "list")
    source = AmdSmi(None, command=(str(printing(tmp_path, RX6600)),),
                    list_command=(str(listing),), sysfs=tmp_path)
    assert source.read() == {"gpu0": RX6600_FIGURES}
    assert not count.exists()


def test_python_warnings_on_stderr_do_not_mix_into_the_json(tmp_path) -> None:
    """Some amd-smi builds print SyntaxWarning lines first (nathaninline/ajean#39, on
    Python 3.14): on stderr, kept apart from the JSON."""
    warn = ("/usr/lib/python3.14/site-packages/amdsmi/amdsmi_interface.py:3569: "
            "SyntaxWarning: 'return' in a 'finally' block")
    script = tool(tmp_path, f"echo \"{warn}\" >&2; cat '{FIXTURES / RX6600}'")
    assert AmdSmi(None, command=(str(script),)).read() == {"gpu0": RX6600_FIGURES}


def test_a_hanging_tool_is_stopped_at_the_timeout(tmp_path) -> None:
    script = tool(tmp_path, "sleep 30 &\nsleep 30")  # a child holds the output open too
    start = time.monotonic()
    with pytest.raises(AmdSmiError, match=r"took over 0\.5s"):
        AmdSmi(None, command=(str(script),), timeout_s=0.5).read()
    assert time.monotonic() - start < 5


def test_a_tool_that_closes_its_output_and_hangs_is_stopped(tmp_path) -> None:
    script = tool(tmp_path, f"cat '{FIXTURES / RX6600}'; exec >&-; sleep 30")
    start = time.monotonic()
    with pytest.raises(AmdSmiError, match="took over"):
        AmdSmi(None, command=(str(script),), timeout_s=0.5).read()
    assert time.monotonic() - start < 5


def test_a_missing_binary_says_so(tmp_path, monkeypatch) -> None:
    with pytest.raises(AmdSmiNotFound, match="not found"):
        AmdSmi(None, command=(str(tmp_path / "amd-smi"),)).read()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(amdsmi, "default_search_path", lambda: str(tmp_path))
    with pytest.raises(AmdSmiNotFound, match="not on PATH nor in /opt/rocm/bin"):
        AmdSmi(None).read()


def test_a_failing_tool_says_its_exit_status_and_first_stderr_line(tmp_path) -> None:
    script = tool(tmp_path, "echo 'AMDSMI_STATUS_DRM_ERROR - DRM call failed' >&2; exit 2")
    with pytest.raises(AmdSmiError, match="exited 2: AMDSMI_STATUS_DRM_ERROR"):
        AmdSmi(None, command=(str(script),)).read()


def test_output_past_the_bound_is_refused(tmp_path) -> None:
    script = tool(tmp_path, "yes '[]' | head -c 5000000")
    with pytest.raises(AmdSmiError, match="printed over"):
        AmdSmi(None, command=(str(script),)).read()


@pytest.mark.parametrize(("body", "message"), [
    ("printf '\\377\\376['", "not UTF-8"),
    ("echo 'Error: amdgpu driver not loaded'", "not JSON"),
    ("true", "not JSON"),
])
def test_odd_tool_output_is_a_clear_error(tmp_path, body, message) -> None:
    with pytest.raises(AmdSmiError, match=message):
        AmdSmi(None, command=(str(tool(tmp_path, body)),)).read()


def test_entries_are_typed_with_their_bus_id() -> None:
    entries = gpu_entries(json.dumps([{"gpu": 0, "bdf": "0000:0B:00.0"},
                                      {"gpu": 1, "bus": {"bdf": "0000:c3:00.0"}},
                                      {"gpu": 2, "bdf": "../../etc"}]))
    assert [(e.index, e.bdf) for e in entries] == [
        (0, RX6600_BDF), (1, "0000:c3:00.0"), (2, None)]
    assert all(math.isnan(v) is False for e in entries for v in e.figures.values() if v)

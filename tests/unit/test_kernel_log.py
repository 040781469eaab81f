"""The kernel log of a run's window (harness/judge/kernellog.py), on real lines: each fault
kind from a host that had it (tests/fixtures/kernellog/, each file naming where its lines
were posted), and real /dev/kmsg records of a development machine of this project, which
must refuse nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.base import catalogue
from harness.judge.kernellog import EXCERPT, findings
from harness.measure.kmsg import MAX_TEXT, Record, record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernellog"


def lines_of(name: str) -> list[Record]:
    """A fixture's records; a line posted without its timestamp keeps its text at 0."""
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        if line and not line.startswith("#"):
            out.append(record(line) or Record(0, line))
    return out


@pytest.mark.parametrize(("name", "rules"), [
    ("amdgpu-gfx-ring-timeout.dmesg",
     [catalogue.KERNEL_LOG_RING_TIMEOUT, catalogue.KERNEL_LOG_GPU_RESET]),
    ("amdgpu-sdma-timeout-older-kernel.dmesg",
     [catalogue.KERNEL_LOG_RING_TIMEOUT, catalogue.KERNEL_LOG_GPU_RESET]),
    ("amdgpu-compute-ring-recovered.dmesg",
     [catalogue.KERNEL_LOG_RING_TIMEOUT, catalogue.KERNEL_LOG_GPU_RESET]),
    ("mce.dmesg", [catalogue.KERNEL_LOG_MCE]),
    ("aer.dmesg", [catalogue.KERNEL_LOG_AER]),
    ("amdgpu-syslog-forms.log",
     [catalogue.KERNEL_LOG_RING_TIMEOUT, catalogue.KERNEL_LOG_GPU_RESET]),
    ("clean-host.kmsg", []),
    ("user-write.kmsg", []),
])
def test_each_real_fault_is_named_by_its_own_rule(name, rules) -> None:
    assert [f.rule for f in findings(lines_of(name))] == rules


def test_a_finding_keeps_its_first_lines_and_counts_the_rest() -> None:
    [timeout, reset] = findings(lines_of("amdgpu-gfx-ring-timeout.dmesg"))
    assert timeout.count == 1 and "ring gfx_0.0.0 timeout" in timeout.lines[0]
    assert reset.count == 3 and reset.lines[0].endswith("GPU reset begin!. Source:  1")
    [mce] = findings(lines_of("mce.dmesg"))
    assert mce.count == 4 and len(mce.lines) == 4  # "In-kernel MCE decoding" is not one
    many = [Record(i, "mce: [Hardware Error]: Machine check events logged") for i in range(9)]
    [found] = findings(many)
    assert len(found.lines) == EXCERPT and found.detail().endswith(f"(and {9 - EXCERPT} more)")


def test_kmsg_and_dmesg_records_are_read_on_the_boot_clock() -> None:
    assert record("6,615,5714778842,-;Memory cgroup out of memory") == Record(
        5714778842, "Memory cgroup out of memory")
    assert record("[  312.522692] amdgpu: ring gfx_0.0.0 timeout") == Record(
        312_522_692, "amdgpu: ring gfx_0.0.0 timeout")
    assert record("[    3.5] x") == Record(3_500_000, "x")
    for junk in ("", " SUBSYSTEM=pci", "# a comment", "6,1,notanumber,-;x", "[12] x"):
        assert record(junk) is None, junk
    assert len(record("6,1,2,-;" + "x" * 50_000).text) == MAX_TEXT  # bounded


def test_similar_words_that_are_no_fault_refuse_nothing() -> None:
    quiet = ["amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
             "MCE: In-kernel MCE decoding enabled.", "mce: CPU supports 7 MCE banks",
             "pcieport 0000:00:1c.0: AER: enabled with IRQ 122",
             "amdgpu 0000:03:00.0: amdgpu: SMU is resumed successfully!"]
    assert findings([Record(0, text) for text in quiet]) == []

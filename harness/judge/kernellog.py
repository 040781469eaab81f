"""What the kernel said during a run's window, and whether that refuses it. Pure.

A GPU reset, a ring timeout (a hung job the driver killed), a machine check or a PCIe
bus error (AER) during a run makes its figures meaningless, however cleanly the workload
exited: the run is refused with the fault's own rule and the lines that show it.

`harness.measure.kmsg` reads the records of the run's window (from the lock taken to the
seal); `findings` names each fault once per kind, with its first lines as the excerpt.
Every line comes from the host's log, where any process may have written (`/dev/kmsg` is
writable by root, and a workload's driver prints what a workload makes it print): records
are bounded, and their text goes out inert wherever it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from harness.base.catalogue import (
    KERNEL_LOG_AER,
    KERNEL_LOG_GPU_RESET,
    KERNEL_LOG_MCE,
    KERNEL_LOG_RING_TIMEOUT,
)
from harness.base.plural import counted
from harness.measure.kmsg import Record

EXCERPT = 5  # lines kept per fault kind

# Each fault kind: its rule and the message shapes that show it, as amdgpu, the MCE
# handler and the AER driver print them (see tests/fixtures/kernellog/ for real lines).
FAULTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (KERNEL_LOG_RING_TIMEOUT, re.compile(r"\bring \S+ timeout\b")),
    (KERNEL_LOG_GPU_RESET, re.compile(
        r"\bGPU reset begin\b|\b(?:MODE1|MODE2|BACO) reset\b|\bdevice wedged\b"
        r"|\bVRAM is lost due to GPU reset\b")),
    (KERNEL_LOG_MCE, re.compile(r"\bmce: \[Hardware Error\]|\bMachine check events logged\b")),
    (KERNEL_LOG_AER, re.compile(r"\bAER: .*error received\b|\bPCIe Bus Error: severity=")),
)


@dataclass(frozen=True)
class Finding:
    """One fault kind seen in the window: its rule and the first lines that show it."""

    rule: str
    count: int
    lines: tuple[str, ...]

    def detail(self) -> str:
        more = f" (and {self.count - len(self.lines)} more)" if self.count > len(self.lines) else ""
        return f"{counted(self.count, 'line')}, first: {self.lines[0]}{more}"


def findings(records: Sequence[Record]) -> list[Finding]:
    """Pure: each fault kind the records show, in FAULTS order, with its first lines."""
    out = []
    for rule, shape in FAULTS:
        hits = [r.text for r in records if shape.search(r.text)]
        if hits:
            out.append(Finding(rule, len(hits), tuple(hits[:EXCERPT])))
    return out

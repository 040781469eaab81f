"""What the kernel said during a run's window, and whether that refuses it. Pure.

A GPU reset, a ring timeout (a hung job the driver killed), a machine check or a PCIe
bus error (AER) during a run makes its figures meaningless, however cleanly the workload
exited: the run is refused with the fault's own rule and the lines that show it.

The kernel log is read from `/dev/kmsg` (one record per line, `PRIO,SEQ,USEC,FLAGS;TEXT`,
USEC on the boot clock) or, where that is what a host allows, `dmesg`'s `[  SEC.USEC] TEXT`
lines. `record` reads either form; `window` keeps the records between two boot-clock
instants (the lock taken, the seal), and `findings` names each fault once per kind, with
its first lines as the excerpt. Every line comes from the host's log, where any process
may have written (`/dev/kmsg` is writable by root, and a workload's driver prints what a
workload makes it print): records are bounded, and their text goes out inert wherever it
is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.base.catalogue import (
    KERNEL_LOG_AER,
    KERNEL_LOG_GPU_RESET,
    KERNEL_LOG_MCE,
    KERNEL_LOG_RING_TIMEOUT,
)
from harness.base.plural import counted

MAX_TEXT = 1000  # one record's text, at most (the kernel's own limit is about this)
EXCERPT = 5  # lines kept per fault kind

_KMSG = re.compile(r"([0-9]+),([0-9]+),([0-9]+),[^;]*;(.*)")
_DMESG = re.compile(r"\[\s*([0-9]+)\.([0-9]{1,6})\]\s?(.*)")

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
class Record:
    """One kernel log record: when (microseconds on the boot clock) and what it said."""

    usec: int
    text: str


@dataclass(frozen=True)
class Finding:
    """One fault kind seen in the window: its rule and the first lines that show it."""

    rule: str
    count: int
    lines: tuple[str, ...]

    def detail(self) -> str:
        more = f" (and {self.count - len(self.lines)} more)" if self.count > len(self.lines) else ""
        return f"{counted(self.count, 'line')}, first: {self.lines[0]}{more}"


def record(line: str) -> Record | None:
    """Pure: a `/dev/kmsg` record or a `dmesg` line; None for anything else (a
    continuation line, a header, garbage)."""
    line = line.rstrip("\n")
    kmsg = _KMSG.fullmatch(line)
    if kmsg is not None:
        return Record(int(kmsg.group(3)), kmsg.group(4)[:MAX_TEXT])
    dmesg = _DMESG.match(line)
    if dmesg is not None:
        usec = int(dmesg.group(1)) * 1_000_000 + int(dmesg.group(2).ljust(6, "0"))
        return Record(usec, dmesg.group(3)[:MAX_TEXT])
    return None


def window(records: Iterable[Record], start_usec: int, end_usec: int) -> list[Record]:
    """Pure: the records from `start_usec` to `end_usec` (both on the boot clock)."""
    return [r for r in records if start_usec <= r.usec <= end_usec]


def findings(records: Sequence[Record]) -> list[Finding]:
    """Pure: each fault kind the records show, in FAULTS order, with its first lines."""
    out = []
    for rule, shape in FAULTS:
        hits = [r.text for r in records if shape.search(r.text)]
        if hits:
            out.append(Finding(rule, len(hits), tuple(hits[:EXCERPT])))
    return out

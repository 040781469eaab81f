"""What the kernel said during a run's window, and whether that refuses it. Pure.

Processes put their own text in the kernel log (a `comm` inside a segfault line, root
writing /dev/kmsg), so a fault is matched only at the start of a record's text on the
driver's own message shape, and a record marked as a process's is never a fault.
A fault makes the figures meaningless however cleanly the workload exited. An unreadable
part of the window may have held one: it refuses a control requiring the kernel log. The
window is judged as read, in bounded memory."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.base.catalogue import (
    KERNEL_LOG_AER,
    KERNEL_LOG_GAP,
    KERNEL_LOG_GPU_RESET,
    KERNEL_LOG_MCE,
    KERNEL_LOG_RING_TIMEOUT,
)
from harness.base.plural import counted
from harness.base.reason import Reason
from harness.measure.kmsg import Gap, Record

EXCERPT = 5  # lines kept per fault kind
GAPS_SHOWN = 3  # gaps named in a refusal's detail

_PCI = r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
# amdgpu's device prefix (dev_info/dev_err: "amdgpu 0000:28:00.0: "), then, by kernel
# version, "amdgpu: " or "[drm] " (with "*ERROR* ").
_AMDGPU = rf"amdgpu {_PCI}: (?:amdgpu: |\[drm\] (?:\*ERROR\* )?)?"
# The older wording of a timed-out job: "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ".
_JOB = r"\[drm:amdgpu_job_timedout \[amdgpu\]\] \*ERROR\* "

# Each fault kind: its rule and the message shapes that show it, matched at the start of a
# record's text, as amdgpu, the MCE handler and the AER driver print them (real lines of
# each in tests/fixtures/kernellog/, each file naming where they were posted).
FAULTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (KERNEL_LOG_RING_TIMEOUT, re.compile(rf"(?:{_AMDGPU}|{_JOB})ring [\w.]+ timeout\b")),
    (KERNEL_LOG_GPU_RESET, re.compile(
        rf"{_AMDGPU}(?:GPU reset begin!|(?:MODE1|MODE2|BACO) reset\b|device wedged\b"
        r"|VRAM is lost due to GPU reset!)"
        r"|\[drm\] VRAM is lost due to GPU reset!")),
    (KERNEL_LOG_MCE, re.compile(r"(?:mce: )?\[Hardware Error\]: ")),
    (KERNEL_LOG_AER, re.compile(
        rf"[a-z0-9_-]+ {_PCI}(?::pcie[0-9]+)?: "
        r"(?:AER: [^:]*error received\b|PCIe Bus Error: severity=)")),
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


def fault(found: Record) -> str | None:
    """Pure: the rule a record shows, or None: the first fault kind whose shape starts its
    text, and never a record its source marks as a process's."""
    if not found.kernel:
        return None
    for rule, shape in FAULTS:
        if shape.match(found.text):
            return rule
    return None


class Tally:
    """The faults of a window fed one record at a time: a count per fault kind and its
    first EXCERPT lines, whatever the window's length."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.lines: dict[str, list[str]] = {}

    def add(self, found: Record) -> bool:
        """Count the record; True when it is one of its kind's first lines (kept however far
        into the window they came)."""
        rule = fault(found)
        if rule is None:
            return False
        self.counts[rule] = self.counts.get(rule, 0) + 1
        first = self.lines.setdefault(rule, [])
        if len(first) < EXCERPT:
            first.append(found.text)
            return True
        return False

    def findings(self) -> list[Finding]:
        return [Finding(rule, self.counts[rule], tuple(self.lines[rule]))
                for rule, _ in FAULTS if rule in self.counts]


def findings(records: Iterable[Record]) -> list[Finding]:
    """Pure: each fault kind the records show, in FAULTS order, with its first lines."""
    tally = Tally()
    for found in records:
        tally.add(found)
    return tally.findings()


def refusals(found: Sequence[Finding], gaps: Sequence[Gap], *, required: bool) -> list[Reason]:
    """Pure: what the window refuses with: each fault always; a gap only where the control
    requires the kernel log (a fault may have been in what could not be read)."""
    reasons = [Reason(f.rule, f.detail()) for f in found]
    if gaps and required:
        shown = "; ".join(g.detail() for g in gaps[:GAPS_SHOWN])
        more = f" (and {len(gaps) - GAPS_SHOWN} more)" if len(gaps) > GAPS_SHOWN else ""
        reasons.append(Reason(KERNEL_LOG_GAP, f"{counted(len(gaps), 'gap')} in the "
                                              f"window: {shown}{more}"))
    return reasons

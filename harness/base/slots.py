"""A slot of a campaign's plan, and one a walk of the plan left unrun, with why: the driver
decides, the readers read it back from the journal, and both build these types so the
line a left slot prints is spelled once. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """One slot of the plan: its index, control and repeat index (0-based), and whether
    its control repeats in the plan (only then is the repeat worth naming)."""

    plan_index: int
    control: str
    repeat_index: int = 0
    repeats: bool = False

    @property
    def label(self) -> str:
        """`kv-auto`, or `kv-auto (repeat 2)` where the control repeats."""
        return f"{self.control} (repeat {self.repeat_index + 1})" if self.repeats \
            else self.control


def slots_of(plan: Sequence[tuple[str, int]], indices: Iterable[int]) -> tuple[Slot, ...]:
    """The plan's slots at `indices` (plan order), each knowing whether its control repeats."""
    counts: dict[str, int] = {}
    for control, _ in plan:
        counts[control] = counts.get(control, 0) + 1
    return tuple(Slot(i, plan[i][0], plan[i][1], counts[plan[i][0]] > 1)
                 for i in sorted(set(indices)) if 0 <= i < len(plan))


@dataclass(frozen=True)
class NotExecuted:
    """A slot of the plan the walk left unrun, and why in one line."""

    slot: Slot
    why: str

    def line(self) -> str:
        """`kv-auto (repeat 2): stop_policy stop-on-refusal after a was refused (RULE)`."""
        return f"{self.slot.label}: {self.why}"

    def as_dict(self) -> dict:
        return {"control": self.slot.control, "plan_index": self.slot.plan_index,
                "repeat_index": self.slot.repeat_index, "label": self.slot.label,
                "why": self.why}

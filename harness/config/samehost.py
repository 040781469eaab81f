"""A campaign's `same_host:` groups: paired controls that must run on one host, in order,
or their difference could be the host's. Under Slurm each group is one job; locally it
only orders its members. A control is in one group at most.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from harness.config.schema import NameField, Strict
from harness.config.suggest import hint
from harness.config.yamlsafe import Document, Fault

MAX_GROUP = 8  # controls in one same_host job: its --time is the sum of theirs
MAX_GROUPS = 1000

Group = Annotated[list[NameField], Field(min_length=2, max_length=MAX_GROUP)]


class SameHostBlock(Strict):
    """The wrapper the loader validates `{"same_host": ...}` with, for positions."""

    same_host: list[Group] = Field(default_factory=list, max_length=MAX_GROUPS)


def faults(groups: Sequence[Sequence[str]], plan: Sequence[tuple[str, int]],
           doc: Document) -> list[Fault]:
    """What is wrong with well-shaped groups against the campaign's plan, each at its
    position: unknown members, a control in two groups (or twice in one), members planned
    unequally often. Pure but for the positions `doc` gives."""
    counts = Counter(control for control, _ in plan)
    seen: dict[str, int] = {}
    found: list[Fault] = []
    for g, group in enumerate(groups):
        for m, name in enumerate(group):
            at = ("same_host", g, m)
            if name not in counts:
                found.append(doc.fault(at, f"same_host: control {name!r} is not in the "
                                           f"campaign's controls{hint(name, set(counts))}"))
            elif name in seen:
                where = "this group" if seen[name] == g else f"group {seen[name] + 1}"
                found.append(doc.fault(at, f"same_host: control {name!r} is already in "
                                           f"{where}; a control runs in one group at most"))
            else:
                seen[name] = g
        times = {name: counts[name] for name in group if name in counts}
        if len(set(times.values())) > 1:
            said = ", ".join(f"{n} x{k}" for n, k in times.items())
            found.append(doc.fault(("same_host", g), f"same_host: the members of group "
                                                     f"{g + 1} must be planned equally often "
                                                     f"(repeat), not {said}"))
    return found


def instances(plan: Sequence[tuple[str, int]],
              groups: Sequence[Sequence[str]]) -> dict[int, tuple[int, ...]]:
    """Plan slot -> the slots of its group's instance (one job), in the group's order;
    a slot in no group is absent. Pure; assumes `faults` found nothing."""
    where: dict[str, list[int]] = {}
    for slot, (control, _) in enumerate(plan):
        where.setdefault(control, []).append(slot)
    found: dict[int, tuple[int, ...]] = {}
    for group in groups:
        for k in range(min(len(where.get(name, ())) for name in group)):
            slots = tuple(where[name][k] for name in group)
            found.update(dict.fromkeys(slots, slots))
    return found

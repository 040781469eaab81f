"""How the controller follows a job in flight: poll pace, missing jobs, seal grace, retries.
Pure. Slurm's end only starts the seal grace: a node set DOWN kept running its job and
sealed 11 s after Slurm's NODE_FAIL."""

from __future__ import annotations

from collections.abc import Sequence

from harness.base.errors import InvalidInput
from harness.measure.slurm.query import JobState


def seal_overdue(ended_at: float, now: float, grace_s: float) -> bool:
    """True once the host had `grace_s` after Slurm's end to seal, and did not."""
    return now - ended_at >= grace_s


def lost(unknown_since: float | None, now: float, lost_after_s: float) -> bool:
    """True when no squeue answer has listed the job for `lost_after_s`: squeue forgets ended
    jobs and accounting may be off. The clock counts only answers squeue gave."""
    return unknown_since is not None and now - unknown_since >= lost_after_s


EXCLUDE_POLICIES = ("never", "node-fail", "always")


def retry_exclude(excluded: Sequence[str], node: str | None, ended: JobState, *,
                  policy: str = "node-fail", max_excluded: int = 8) -> tuple[str, ...]:
    """The --exclude of the retry of an interrupted attempt. Pure. `node-fail`: avoid the node
    Slurm lost; `always`: any interrupted attempt's node; `never`. Bounded, oldest dropped."""
    if policy not in EXCLUDE_POLICIES:
        raise InvalidInput(f"exclude policy must be one of {EXCLUDE_POLICIES}: {policy!r}")
    out = list(dict.fromkeys(excluded))
    add = node is not None and (policy == "always"
                                or (policy == "node-fail" and ended == JobState.NODE_FAIL))
    if add and node not in out:
        out.append(node)
    return tuple(out[-max_excluded:]) if max_excluded > 0 else ()


def next_poll_s(previous_s: float, *, changed: bool, failures: int, base_s: float = 2.0,
                ceiling_s: float = 60.0, factor: float = 1.5) -> float:
    """Seconds to the next poll: base after a change, slower when quiet, doubling on failure."""
    if failures > 0:
        return min(ceiling_s, base_s * 2.0 ** min(failures, 30))
    if changed:
        return base_s
    return min(ceiling_s, max(base_s, previous_s * factor))


"""How the controller follows a job in flight: the poll pace, when a job missing from
squeue counts as ended, how long a host may take to seal, and what a retry avoids. Pure:
the executor (harness.driver.slurm) is the thin shell that applies them.

A row's states are the night journal's own (harness.measure.nightfolder.transitions):
`running` is committed before sbatch, a `slurm-job` event (job id and token) after it,
and the row ends with the status its sealed run records, never Slurm's word. Slurm's end
(done, cancelled, out of time, node lost) only starts the seal grace: a node set DOWN
kept running its job and sealed 11 s after Slurm's NODE_FAIL.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.base.errors import InvalidInput
from harness.measure.slurm.query import JobState


def seal_overdue(ended_at: float, now: float, grace_s: float) -> bool:
    """True once the host had `grace_s` after Slurm's end to seal, and did not."""
    return now - ended_at >= grace_s


def lost(unknown_since: float | None, now: float, lost_after_s: float) -> bool:
    """True when no answer squeue gave has listed the job for `lost_after_s`: treat it as
    ended (and wait for the seal), since squeue forgets ended jobs and accounting may be
    off. The caller starts the clock only on answers squeue gave (an unreachable
    slurmctld is no news)."""
    return unknown_since is not None and now - unknown_since >= lost_after_s


EXCLUDE_POLICIES = ("never", "node-fail", "always")


def retry_exclude(excluded: Sequence[str], node: str | None, ended: JobState, *,
                  policy: str = "node-fail", max_excluded: int = 8) -> tuple[str, ...]:
    """The --exclude of the retry of an interrupted attempt. Pure.

    `node-fail` (default): avoid the node Slurm lost; `always`: avoid the node of any
    interrupted attempt; `never`: keep the list. Bounded, so a flaky night cannot exclude
    a whole partition (the oldest exclusions are dropped first)."""
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
    """Seconds to the next batched status query. Pure.

    Back to `base_s` as soon as something changed (a job started or ended); slower by
    `factor` each quiet cycle, up to `ceiling_s`; after failed queries, doubling from the
    base per consecutive failure (a controller under load is not hammered)."""
    if failures > 0:
        return min(ceiling_s, base_s * 2.0 ** min(failures, 30))
    if changed:
        return base_s
    return min(ceiling_s, max(base_s, previous_s * factor))


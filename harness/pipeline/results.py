"""What each stage of a run found, as frozen values: the stage runner stores them, the
next stage reads them, `finish` builds the record from them. And what one run hands the
next run of its campaign (`Carried`): measurements a few ms old, worth it for a night's
handoff between short controls (`make bench`'s `handoff_s`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.reason import Reason
from harness.base.states import Status
from harness.judge.verdict import post_reasons
from harness.judge.verdictfile import PostResult
from harness.measure.lock import Held
from harness.measure.seal import SourceSeal

# How old a carried measurement may be when the next run's preflight takes it (`Carried`).
CARRY_MAX_S = 5.0


@dataclass(frozen=True)
class Carried:
    """What one run's after-run checks measured (host snapshot, source seal), offered to
    the next run this process launches right after, instead of taking them again ~10 ms
    later. Sound: an earlier "before" only widens the window the next run's checks compare
    across. Recorded in the next run's preflight.json, never in this run's."""

    from_run: str
    taken_at: str  # UTC, when the later of the two was taken
    taken: float  # time.monotonic() then
    inputs: tuple[str, ...]  # the campaign's input files the seal covered
    host: dict | None = None  # host-after.json of `from_run`
    seal: SourceSeal | None = None  # the source seal `from_run` was re-checked with

    def usable(self, inputs: list[Path], now: float | None = None) -> bool:
        """Fresh enough (CARRY_MAX_S) and a seal over exactly these inputs."""
        age = (time.monotonic() if now is None else now) - self.taken
        return 0 <= age <= CARRY_MAX_S and self.inputs == tuple(map(str, inputs))

    def record(self, *, host: bool) -> dict:
        """preflight.json's `carried`: what was taken over, from which run, and when."""
        return {"from_run": self.from_run, "taken_at": self.taken_at,
                "source_seal": self.seal is not None,
                "host_before": host and self.host is not None}


@dataclass(frozen=True)
class Preflight:
    """Before the lock: what the run is pinned to, as found, and why it may not run."""

    seal: SourceSeal | None = None
    provenance: dict | None = None  # the project's git state (measure.provenance.git_state)
    harness: dict | None = None  # the harness that ran it (measure.provenance.harness_state)
    approval: dict | None = None  # the approval it runs under (probe.approval.runcheck.for_run)
    image_id: str | None = None  # set only when the local image is the pinned one
    model_hashes: dict[str, str] = field(default_factory=dict)
    # the real model folder hashed: the launch mounts it, and refuses if the path moved
    model_real: Path | None = None
    # a Slurm job's GPUs' render nodes (rocm): the container gets these, not all /dev/dri
    render_nodes: tuple[str, ...] | None = None
    gathered: Mapping[str, Any] = field(default_factory=dict)
    reasons: tuple[Reason, ...] = ()


@dataclass(frozen=True)
class Launch:
    """Under the lock: the lock's hold, how the container ended, and the reasons that
    refused the launch or that the container's exit left."""

    held: Held | None = None
    outcome: dict | None = None  # outcome.json; None when no container ran
    gathered: Mapping[str, Any] = field(default_factory=dict)  # as `Preflight.gathered`
    reasons: tuple[Reason, ...] = ()


@dataclass(frozen=True)
class Post:
    """Each post-step's result, in the order they ran."""

    results: tuple[PostResult, ...] = ()

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """The refusing steps' reasons, for the stage record."""
        return tuple(r for p in self.results for r in post_reasons(p))


@dataclass(frozen=True)
class Sealed:
    """How a run ended once sealed: status, reasons, what it offers the next run, and
    whether a stop signal came while it was being sealed."""

    status: Status
    reasons: tuple[Reason, ...]
    handover: Carried | None = None
    stop_requested: bool = False

"""What one run hands the next run of its campaign: measurements a few ms old, worth it
for a night's handoff between short controls (`make bench`'s `handoff_s`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

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

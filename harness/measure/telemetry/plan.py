"""Which telemetry a run samples: the container's cgroup, and on `rocm` each GPU the control
uses from amd-smi. A source that cannot be set up is left out and named: telemetry never
stops a control from running.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.measure.telemetry.cgroup import Cgroup
from harness.measure.telemetry.sampler import Sampler, Source


@dataclass(frozen=True)
class Plan:
    """What to sample, decided before the launch: the interval, the profile, the GPUs."""

    interval: float
    device: str
    gpus: tuple[int, ...] | None = None


def gpu_indices(gpus: str | None) -> tuple[int, ...] | None:
    """A control's `gpus: "0,1"` as indices; None for every GPU."""
    return tuple(int(g) for g in gpus.split(",")) if gpus else None


def sources(plan: Plan, cgroup_lines: Sequence[str] | None) -> tuple[list[Source], list[str]]:
    """The sources this run can read, and why any it should have is missing."""
    found: list[Source] = []
    missing: list[str] = []
    try:
        if not cgroup_lines:
            raise ValueError("the container's cgroup was not observed (it had exited)")
        found.append(Cgroup(cgroup_lines))
    except (ValueError, OSError) as e:
        missing.append(f"container: {e}")
    if plan.device == "rocm":
        from harness.measure.telemetry import amdsmi  # only on GPU hosts

        source = amdsmi.AmdSmi(plan.gpus)
        try:
            amdsmi.resolve_command(source.command)
            found.append(source)
        except amdsmi.AmdSmiError as e:
            missing.append(f"gpu: {e}")
    return found, missing


def start(plan: Plan, cgroup_lines: Sequence[str] | None, path: Path
          ) -> tuple[Sampler | None, list[str]]:
    """The started sampler (None when no source could be set up), and what is missing."""
    found, missing = sources(plan, cgroup_lines)
    if not found:
        return None, missing
    return Sampler(found, path, plan.interval).start(), missing

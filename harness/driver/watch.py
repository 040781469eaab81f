"""What the Slurm executor holds: the night's settings for every job, and one Watch per job
in flight (its members, and what the follow-up has seen of it so far). Plain data."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.driver.plan import LaunchRequest
from harness.measure.slurm import job
from harness.measure.slurm.query import Job, JobState


@dataclass(frozen=True)
class Settings:
    """The night's side of every job: which night, where things are, how long to wait."""

    night: str  # the night folder's name: part of every job's token
    campaign_file: str
    site: job.Site
    lock_wait_s: float = 600.0
    until: datetime | None = None
    seal_grace_s: float = 120.0  # after Slurm's end, how long the host may take to seal
    lost_after_s: float = 30.0  # absent from every answer this long: ended (squeue forgets)
    poll_base_s: float = 1.0
    poll_ceiling_s: float = 30.0
    exclude_policy: str = "node-fail"
    env: Mapping[str, str] | None = None  # the Slurm clients' environment (SLURM_CONF)
    jobcomp: Path | None = None  # jobcomp/filetxt file, where there is no accounting
    use_sacct: bool = False
    # run id -> its verified bundle's arrival from the drop (None: nothing new), given by
    # the command line (bundles are a layer above) where hosts keep runs on local disks
    fetch: Callable[[str], Mapping[str, object] | None] | None = None


Members = Sequence[LaunchRequest] | LaunchRequest  # one control, or a same_host group's


def members(requests: Members) -> tuple[LaunchRequest, ...]:
    return (requests,) if isinstance(requests, LaunchRequest) else tuple(requests)


@dataclass
class Watch:
    """One job in flight: its requests, and what its follow-up has seen so far."""

    job_id: str
    requests: tuple[LaunchRequest, ...]
    token: str
    last: JobState | None = None
    ended: Job | None = None
    ended_at: float | None = None
    unknown_since: float | None = None
    failures: int = 0
    started: bool = False  # Slurm said RUNNING at least once
    cancelled: bool = False  # the controller scancelled it while pending (a stop)
    sealed_at: dict[str, float] = field(default_factory=dict)  # run id -> first seen sealed
    reported: set[str] = field(default_factory=set)  # run ids whose outcome was given
    fetched: set[str] = field(default_factory=set)  # run ids whose bundle the drop gave
    claimed: set[str] = field(default_factory=set)  # run ids the controller claimed: not run
    claims_made: bool = False  # the stop's claims were made for this job (once)

    def __post_init__(self) -> None:
        self.requests = members(self.requests)

"""What each stage of a run found, as frozen values.

A stage returns one of these instead of writing into the run's context; the stage runner
(`harness.pipeline.stage.run_stages`) stores it there, the next stage reads it, and
`finish` builds the record from them. `reasons` is what the stage refuses with (empty to
go on); the runner files them before or after the container by whether one ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.base.reason import Reason
from harness.base.states import Status
from harness.judge.verdict import PostResult, post_reasons
from harness.measure.kmsg import Mark
from harness.measure.lock import Held
from harness.measure.mountdigest import MountDigest
from harness.measure.seal import SourceSeal
from harness.pipeline.carried import Carried


@dataclass(frozen=True)
class Preflight:
    """Before the lock: what the run is pinned to, as found, and why it may not run."""

    seal: SourceSeal | None = None
    provenance: dict | None = None  # the project's git state (measure.provenance.git_state)
    harness: dict | None = None  # the harness that ran it (measure.provenance.harness_state)
    approval: dict | None = None  # the approval it runs under (probe.approval.check.for_run)
    image_id: str | None = None  # set only when the local image is the pinned one
    model_hashes: dict[str, str] = field(default_factory=dict)
    # The model folder's real path (every symlink resolved) when it was hashed: the launch
    # mounts exactly this folder, and refuses if the declared path now leads elsewhere.
    model_real: Path | None = None
    # In a Slurm job on the rocm profile: the allocated GPUs' render nodes, from the host's
    # GPU map; the container gets these instead of all /dev/dri.
    render_nodes: tuple[str, ...] | None = None
    # What each mount outside the source seal (`sealed: false`, read-write) held before the
    # launch; None until taken (a run cut short before then has no record of it).
    mounts: tuple[MountDigest, ...] | None = None
    reasons: tuple[Reason, ...] = ()


@dataclass(frozen=True)
class Launch:
    """Under the lock: how long it was waited for and held, how the container ended, and
    the reasons that refused the launch or that the container's exit left (what the
    workload planted in its read-write mounts)."""

    held: Held | None = None
    kernel: Mark | None = None  # where the kernel log's window starts (taken with the lock)
    outcome: dict | None = None  # outcome.json; None when no container ran
    reasons: tuple[Reason, ...] = ()


@dataclass(frozen=True)
class Post:
    """Each post-step's result, in the order they ran."""

    results: tuple[PostResult, ...] = ()

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """The refusing steps' reasons, for the stage record (the verdict reads the
        results themselves, with the outcome)."""
        return tuple(r for p in self.results for r in post_reasons(p))


@dataclass(frozen=True)
class Sealed:
    """How a run ended, once its folder is sealed: the status and every reason for it,
    what its after-run checks offer the next run (`Carried`), and whether a stop signal
    came while it was being sealed (the campaign stops after it)."""

    status: Status
    reasons: tuple[Reason, ...]
    handover: Carried | None = None
    stop_requested: bool = False

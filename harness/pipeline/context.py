"""What the stages of one run share: the inputs, the run folder and what each stage found.

`preflight` holds the reasons that stopped the run before a container existed (whichever
stage found them), `after` those found once it ran; `stages` says which stage did what.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.reason import Reason
from harness.base.timeutil import stamp, utc_now
from harness.config.loader import Loaded, resolve
from harness.config.schema import Control
from harness.judge.verdict import PostResult
from harness.measure.lock import GpuLock, Held
from harness.measure.seal import SourceSeal
from harness.measure.ui import Reporter


def new_run_id(control: str) -> str:
    """`<control>-<UTC stamp>-<8 hex>`: operators sharing a runs folder may start in the
    same second; 32 random bits keep their folders apart (16 collided once in a CI run
    of eight at once)."""
    return f"{control}-{stamp()}-{secrets.token_hex(4)}"


# How old a carried measurement may be when the next run's preflight takes it (`Carried`).
CARRY_MAX_S = 5.0


@dataclass(frozen=True)
class Carried:
    """What one run's after-run checks measured, offered to the next run of the same
    campaign that the same harness process launches right after it: the host snapshot and
    the source seal, taken again ~10 ms later otherwise (a quarter of the harness's own
    time between two containers).

    Sound because a "before" only has to precede the container it vouches for: an earlier
    one widens the window that run's after-run checks compare across, so anything that
    changes in between still refuses it (HOST-DRIFT, SEAL-CHANGED). It is recorded in the
    next run's preflight.json (`carried`: from which run, taken when) and never in the run
    it came from, whose evidence is what it always was."""

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


@dataclass
class RunContext:
    loaded: Loaded
    control: Control
    control_file: Path
    run_id: str
    run_dir: Path
    ui: Reporter
    rerun_of: dict | None = None
    attempt: int = 1
    created: str = field(default_factory=utc_now)
    image_id: str | None = None
    seal: SourceSeal | None = None
    approval: dict | None = None  # the approval it runs under (harness.judge.approval.check)
    provenance: dict | None = None  # the project's git state (harness.measure.provenance.git_state)
    model_hashes: dict[str, str] = field(default_factory=dict)
    preflight: list[Reason] = field(default_factory=list)
    held: Held | None = None
    outcome: dict | None = None
    post: list[PostResult] = field(default_factory=list)
    after: list[Reason] = field(default_factory=list)
    stop_requested: bool = False
    lock: GpuLock | None = None  # the launch stage holds it around the container
    stages: list[dict] = field(default_factory=list)  # one entry per stage that ran
    carried: Carried | None = None  # offered by the run before (its preflight may take it)
    handover: Carried | None = None  # what this run's after-run checks offer the next one

    # The model folder's real path (every symlink resolved) when preflight hashed it: the
    # launch mounts exactly this folder, and refuses if the declared path now leads elsewhere.
    model_real: Path | None = None
    # In a Slurm job on the rocm profile: the allocated GPUs' render nodes, from the host's
    # GPU map (preflight.check_gpu_map); the container gets these instead of all /dev/dri.
    render_nodes: tuple[str, ...] | None = None

    @property
    def model_declared(self) -> Path | None:
        """The model folder as the control names it, relative to the control's folder."""
        if self.control.model is None:
            return None
        return resolve(self.control.model.source, self.control_file.parent)

    @property
    def model_source(self) -> Path | None:
        """The folder that was hashed (and is mounted), once preflight has resolved it."""
        return self.model_real or self.model_declared

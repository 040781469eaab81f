"""What the stages of one run share: the inputs, the run folder and what each stage found.

`preflight` holds the reasons that stopped the run before a container existed (whichever
stage found them), `after` those found once it ran; `stages` says which stage did what.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.loader import Loaded, resolve
from harness.config.schema import Control
from harness.lock import GpuLock, Held
from harness.seal import SourceSeal
from harness.timeutil import stamp, utc_now
from harness.ui import Reporter
from harness.verdict import PostResult, Reason


def new_run_id(control: str) -> str:
    """`<control>-<UTC stamp>-<8 hex>`: operators sharing a runs folder may start in the
    same second; 32 random bits keep their folders apart (16 collided once in a CI run
    of eight at once)."""
    return f"{control}-{stamp()}-{secrets.token_hex(4)}"


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
    approval: dict | None = None  # the approval it runs under (harness.approval.check)
    provenance: dict | None = None  # the project's git state (harness.provenance.git_state)
    model_hashes: dict[str, str] = field(default_factory=dict)
    preflight: list[Reason] = field(default_factory=list)
    held: Held | None = None
    outcome: dict | None = None
    post: list[PostResult] = field(default_factory=list)
    after: list[Reason] = field(default_factory=list)
    stop_requested: bool = False
    lock: GpuLock | None = None  # the launch stage holds it around the container
    stages: list[dict] = field(default_factory=list)  # one entry per stage that ran

    # The model folder's real path (every symlink resolved) when preflight hashed it: the
    # launch mounts exactly this folder, and refuses if the declared path now leads elsewhere.
    model_real: Path | None = None

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

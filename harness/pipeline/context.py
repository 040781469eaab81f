"""One run's context: its inputs, fixed when its folder is made, and what each stage found.
Its methods are its only writers: the stage runner stores each stage's frozen result and
files each reason as `stopped` (before a container existed) or `after`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.base.catalogue import RUN_INTERRUPTED
from harness.base.names import RunId
from harness.base.reason import Reason
from harness.base.timeutil import utc_now
from harness.config.loader import Loaded, resolve
from harness.config.schema import Control
from harness.measure.lock import GpuLock
from harness.measure.ui import Reporter
from harness.pipeline.results import Carried, Launch, Post, Preflight

# Each stage's result, by the stage's name (the field `took` stores it in).
RESULTS: dict[str, type] = {"preflight": Preflight, "launch": Launch, "post": Post}


@dataclass
class RunContext:
    # the inputs
    loaded: Loaded
    control: Control
    control_file: Path
    run_id: RunId
    run_dir: Path
    ui: Reporter
    rerun_of: dict | None = None
    attempt: int = 1
    created: str = field(default_factory=utc_now)
    carried: Carried | None = None  # offered by the run before (its preflight may take it)
    lock: GpuLock | None = None  # the launch stage holds it around the container
    # what the stages found, stored by the stage runner alone
    preflight: Preflight = field(default_factory=Preflight)
    launch: Launch = field(default_factory=Launch)
    post: Post = field(default_factory=Post)
    stages: tuple[dict, ...] = ()  # one record per stage that ran
    stopped: tuple[Reason, ...] = ()
    after: tuple[Reason, ...] = ()

    @property
    def outcome(self) -> dict | None:
        """outcome.json, once a container ran; None before (or when none did)."""
        return self.launch.outcome

    @property
    def model_declared(self) -> Path | None:
        """The model folder as the control names it, relative to the control's folder."""
        if self.control.model is None:
            return None
        return resolve(self.control.model.source, self.control_file.parent)

    @property
    def model_source(self) -> Path | None:
        """The folder that was hashed (and is mounted), once preflight has resolved it."""
        return self.preflight.model_real or self.model_declared

    def took(self, stage: str, result: Any) -> Any:
        """Store what `stage` found (whole or, when it was cut short, as far as it got)."""
        kind = RESULTS.get(stage)
        if kind is None or not isinstance(result, kind):
            raise TypeError(f"stage {stage!r} cannot hold a {type(result).__name__}")
        setattr(self, stage, result)
        return result

    def recorded(self, record: dict) -> None:
        """One stage's entry in run.json's `stages`."""
        self.stages = (*self.stages, record)

    def file(self, reasons: list[Reason] | tuple[Reason, ...]) -> None:
        """Before a container exists, reasons stop the run; afterwards they judge it."""
        if self.outcome is None:
            self.stopped = (*self.stopped, *reasons)
        else:
            self.after = (*self.after, *reasons)

    def interrupted(self, signal: str) -> None:
        """A stop signal cut the run (before a container: RUN-INTERRUPTED)."""
        if self.outcome is None:
            self.file([Reason(RUN_INTERRUPTED, f"harness received {signal}")])
        else:
            outcome = {**self.outcome, "interrupted": True, "signal": signal}
            self.launch = replace(self.launch, outcome=outcome)

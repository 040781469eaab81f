"""What one launch is, what came of it, and who launches and records it.

`LaunchRequest` and `Outcome` are plain data, so an executor that runs a control somewhere
else (a Slurm job, say) takes the same request and answers with the same outcome; the plan,
the stop policy and the journal never learn where the control ran.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.pipeline.context import new_run_id


@dataclass(frozen=True)
class LaunchRequest:
    """One control to launch: its folder is chosen (and journaled) before it exists."""

    control: str
    run_dir: Path  # <runs-dir>/<run-id>: the run id is its name
    attempt: int = 1
    rerun_of: dict | None = None  # {"run_id", "path", "reason"} of the run this repeats
    plan_index: int | None = None

    @property
    def run_id(self) -> str:
        return self.run_dir.name


def new_request(control: str, runs_dir: Path, *, attempt: int = 1,
                rerun_of: dict | None = None, plan_index: int | None = None) -> LaunchRequest:
    """A request with a fresh run id under `runs_dir` (the folder is not made here)."""
    return LaunchRequest(control, Path(runs_dir) / new_run_id(control), attempt=attempt,
                         rerun_of=rerun_of, plan_index=plan_index)


@dataclass(frozen=True)
class Outcome:
    """How a launched control ended: what the run folder says, and what the caller needs.

    `error` is set when the harness itself could not run or seal the control (its folder
    could not be made or sealed); such an outcome is `failed` with the error's rule."""

    run_dir: Path
    status: str
    exit_code: int
    reasons: tuple[str, ...] = ()
    stop_requested: bool = False
    error: Exception | None = field(default=None, compare=False)
    remote: bool = False  # it ran elsewhere (a Slurm job): see policy.stop_reason

    @property
    def reason_text(self) -> str:
        return "; ".join(self.reasons)


class Executor(Protocol):
    """Launches one control and waits for its sealed outcome (here: Docker; later: Slurm)."""

    def launch(self, request: LaunchRequest) -> Outcome: ...


class Recorder(Protocol):
    """Where launches are recorded. `started` is durable before the launch happens."""

    def started(self, request: LaunchRequest) -> None: ...

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None: ...


class Source(Recorder, Protocol):
    """A plan being walked: the next launch, or why there is none (done, deadline, ...)."""

    def next_launch(self) -> LaunchRequest | str: ...


class PlanSource:
    """`harness run`'s plan: each (control, repeat) once, in order, recorded nowhere but in
    the run folders themselves (which are sealed whatever happens)."""

    def __init__(self, plan: Sequence[tuple[str, int]], runs_dir: Path, *,
                 run_id: str | None = None, attempt: int = 1) -> None:
        self._todo = list(enumerate(plan))
        self._runs_dir = Path(os.path.abspath(runs_dir))
        self._run_id = run_id  # chosen by a controller (a Slurm job's): a one-control plan
        self._attempt = attempt

    def next_launch(self) -> LaunchRequest | str:
        if not self._todo:
            return "done"
        index, (control, _repeat) = self._todo.pop(0)
        if self._run_id is not None:
            return LaunchRequest(control, self._runs_dir / self._run_id,
                                 attempt=self._attempt, plan_index=index)
        return new_request(control, self._runs_dir, attempt=self._attempt, plan_index=index)

    def started(self, request: LaunchRequest) -> None:
        """Nothing to record: `harness run` keeps no journal."""

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None:
        """Nothing to record: the sealed folder is the record."""

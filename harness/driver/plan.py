"""What one launch is (`LaunchRequest`), what came of it (`Outcome`), and the shapes the
one campaign loop walks. Plain typed data, so the plan, the stop policy and the journal
never learn where a control ran, and decisions read fields, never text."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from harness.base.names import RunId
from harness.base.reason import Reason
from harness.base.slots import Slot, slots_of
from harness.base.states import Status, exit_code
from harness.driver.policy import Why


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
    return LaunchRequest(control, RunId.mint(control).folder(runs_dir), attempt=attempt,
                         rerun_of=rerun_of, plan_index=plan_index)


@dataclass(frozen=True)
class Outcome:
    """How a launched control ended. `error`: the harness itself could not run or seal it
    (then `failed`, with the error's rule)."""

    run_dir: Path
    status: Status
    exit_code: int
    reasons: tuple[Reason, ...] = ()
    stop_requested: bool = False
    error: Exception | None = field(default=None, compare=False)
    remote: bool = False  # it ran elsewhere (a Slurm job): see policy.stop_reason

    @classmethod
    def of(cls, run_dir: Path, status: Status | str, reasons: Iterable[Reason] = (),
           **kw: object) -> Outcome:
        """The outcome of a sealed `status`, its exit code by the one rule."""
        got = tuple(reasons)
        return cls(run_dir, Status(status), exit_code(Status(status), got), got, **kw)


class Recorder(Protocol):
    """Where launches are recorded. `started` is durable before the launch happens."""

    def started(self, request: LaunchRequest) -> None: ...

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None: ...


class LaunchSource(Recorder, Protocol):
    """A plan being walked: the next launch (a request, or a `same_host` group's members
    where `together`), or why there is none; `busy` are the slots still in flight."""

    def next_launches(self, busy: frozenset[int] = frozenset(), *, together: bool = False,
                      ) -> tuple[LaunchRequest, ...] | str: ...

    def withdrawn(self, request: LaunchRequest, reason: str) -> None: ...

    def past_deadline(self) -> bool: ...

    def left(self) -> tuple[Slot, ...]:
        """The plan's slots not started (or planned again) so far, in plan order."""
        ...


class InFlight(Protocol):
    """A launch an executor started and follows: its members, and its failed queries."""

    requests: tuple[LaunchRequest, ...]
    failures: int


W = TypeVar("W", bound=InFlight)


class Executor(Protocol[W]):
    """Where controls run: `window` launches in flight (1 here, where `start` waits),
    whether a `same_host` group is one launch (`together`), how many of the plan's launches
    one start takes (`per_job`), and how a launch is followed."""

    window: int
    together: bool
    per_job: int

    def launch(self, request: LaunchRequest) -> Outcome: ...

    def start(self, requests: tuple[LaunchRequest, ...]) -> W | Outcome: ...

    def poll(self, flying: list[W],
             ) -> tuple[list[tuple[W, LaunchRequest, Outcome | None]], bool]: ...

    def pause(self, changed: bool, failures: int) -> None: ...

    def cancel_pending(self, flying: list[W]) -> list[W]: ...


class NightExecutor(Executor[W], Protocol):
    """What a night asks of its executor besides the walk: the host check before a control,
    and what became of launches a dead harness left `running`."""

    def preflight(self, control: str, runs_dir: Path) -> list[str]: ...

    def recover(self, requests: tuple[LaunchRequest, ...], job_id: str | None,
                ) -> list[tuple[LaunchRequest, Outcome | None]]: ...


class PlanSource:
    """`harness run`'s plan: each (control, repeat) once; the sealed folders are the record."""

    def __init__(self, plan: Sequence[tuple[str, int]], runs_dir: Path, *,
                 run_id: RunId | None = None, attempt: int = 1) -> None:
        self._plan = list(plan)
        self._todo = list(enumerate(plan))
        self._runs_dir = Path(os.path.abspath(runs_dir))
        self._run_id = run_id  # chosen by a controller (a Slurm job's): a one-control plan
        self._attempt = attempt

    def next_launches(self, busy: frozenset[int] = frozenset(), *, together: bool = False,
                      ) -> tuple[LaunchRequest, ...] | str:
        if not self._todo:
            return Why.DONE
        index, (control, _repeat) = self._todo.pop(0)
        if self._run_id is not None:
            return (LaunchRequest(control, self._run_id.folder(self._runs_dir),
                                  attempt=self._attempt, plan_index=index),)
        return (new_request(control, self._runs_dir, attempt=self._attempt,
                            plan_index=index),)

    def started(self, request: LaunchRequest) -> None:
        """Nothing to record: `harness run` keeps no journal."""

    def finished(self, request: LaunchRequest, outcome: Outcome) -> None:
        """Nothing to record: the sealed folder is the record."""

    def withdrawn(self, request: LaunchRequest, reason: str) -> None:
        """Never asked: nothing waits in a queue here."""

    def past_deadline(self) -> bool:
        return False

    def left(self) -> tuple[Slot, ...]:
        return slots_of(self._plan, (i for i, _ in self._todo))

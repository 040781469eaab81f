"""The campaign loop with several launches in flight at once: the Slurm submit window.

`drive` (drive.py) launches one control and waits for it; a night on a cluster would then
use one GPU of it. Here up to `window` jobs are submitted or running at once; one batched
status query per cycle finds the ones that are done, and each outcome is recorded from
its sealed run as it arrives, in the order they end. The stop policy is asked after each
outcome exactly as in `drive`, the deadline each cycle; once the walk stops (stop policy,
deadline, environment)
nothing more is submitted, the jobs still pending are cancelled (recorded as not run:
their rows are planned again), and the running ones finish and seal.

Why the source is asked with `busy`: a slot in flight is `running` in the journal, which
the plain walk would take for a run a dead harness left behind.

A launch is one request, or a `same_host` group's members (harness.config.samehost): each
member is recorded `started` before the one job that runs them all is submitted, and each
gets its own outcome as the executor finds it; the job leaves the window once every
member's outcome is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol, TypeVar

from harness.driver.drive import Driven, crashed
from harness.driver.plan import LaunchRequest, Outcome, Recorder
from harness.driver.policy import STOP_POLICY, stop_reason
from harness.measure.ui import Reporter


class InFlight(Protocol):
    requests: tuple[LaunchRequest, ...]
    failures: int


W = TypeVar("W", bound=InFlight)


class WindowSource(Recorder, Protocol):
    """A plan walked with several launches in flight."""

    def next_launches(self, busy: frozenset[int] = frozenset(),
                      ) -> tuple[LaunchRequest, ...] | str: ...

    def withdrawn(self, request: LaunchRequest, reason: str) -> None: ...

    def past_deadline(self) -> bool: ...


class WindowExecutor(Protocol[W]):
    """Starts launches without waiting, and follows them all with one query per cycle."""

    def start(self, requests: tuple[LaunchRequest, ...]) -> W | Outcome: ...

    def poll(self, flying: list[W],
             ) -> tuple[list[tuple[W, LaunchRequest, Outcome | None]], bool]: ...

    def pause(self, changed: bool, failures: int) -> None: ...

    def cancel_pending(self, flying: list[W]) -> list[W]: ...


class _Walk:
    """One walk's state: what flies, why it stops, every outcome."""

    def __init__(self, source: WindowSource, stop_policy: str, ui: Reporter,
                 on_outcome: Callable[[Outcome], None] | None) -> None:
        self.source, self.stop_policy, self.ui = source, stop_policy, ui
        self.on_outcome = on_outcome
        self.driven = Driven("done")
        self.stop: str | None = None  # set once: nothing more is submitted
        self.given: dict[int, int] = {}  # id of a job in flight -> members given so far

    def keep_open(self, flying: list, given: list) -> list:
        """The jobs in flight that still owe a member's outcome (a group's job stays until
        its last member is given)."""
        for w in given:
            self.given[id(w)] = self.given.get(id(w), 0) + 1
        ended = [w for w in flying if self.given.get(id(w), 0) >= len(w.requests)]
        for w in ended:
            del self.given[id(w)]
        return [w for w in flying if not any(w is e for e in ended)]

    def record(self, request: LaunchRequest, outcome: Outcome) -> None:
        """Record the outcome (journal first), then ask the stop policy."""
        self.source.finished(request, outcome)
        self.driven.outcomes.append(outcome)
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        why = stop_reason(self.stop_policy, outcome.status, outcome.exit_code,
                          outcome.stop_requested, remote=outcome.remote)
        if why == STOP_POLICY and self.stop is None:
            self.ui.event("stop-policy", policy=self.stop_policy, status=outcome.status)
        if why is not None and self.stop is None:
            self.stop = why


def drive_window(source: WindowSource, executor: WindowExecutor, *, window: int,
                 stop_policy: str, ui: Reporter,
                 on_outcome: Callable[[Outcome], None] | None = None) -> Driven:
    """Keep up to `window` launches in flight until the plan is done or the walk stops."""
    walk = _Walk(source, stop_policy, ui, on_outcome)
    flying: list = []
    last, changed = "done", True
    while True:
        if walk.stop is None and flying and source.past_deadline():
            walk.stop = "deadline"  # a full window waits no longer for a slot to free
        while walk.stop is None and len(flying) < max(1, window):
            requests = source.next_launches(frozenset(
                r.plan_index for w in flying for r in w.requests if r.plan_index is not None))
            if isinstance(requests, str):
                last = requests
                if requests != "done":  # deadline, environment: stop, cancel what waits
                    walk.stop = requests
                break
            _start(walk, executor, requests, flying)
        if walk.stop is not None and flying:
            executor.cancel_pending(flying)  # only those never started; once each
        if not flying:
            walk.driven.why = walk.stop or last
            return walk.driven
        executor.pause(changed, max(w.failures for w in flying))
        done, changed = executor.poll(flying)
        for _, request, outcome in done:
            if outcome is None:
                source.withdrawn(request, f"not run: its job was cancelled while pending "
                                 f"({walk.stop or 'Slurm: its --deadline passed'})")
            else:
                walk.record(request, outcome)
        flying = walk.keep_open(flying, [w for w, _, _ in done])


def _start(walk: _Walk, executor: WindowExecutor, requests: tuple[LaunchRequest, ...],
           flying: list) -> None:
    """Record every member `started` (committed before the job exists), then submit."""
    for request in requests:
        walk.source.started(request)
    try:
        started = executor.start(requests)
    except Exception as e:
        for request in requests:
            walk.source.finished(request, crashed(request, e))
        raise
    if isinstance(started, Outcome):  # the submission failed: every member says so
        for request in requests:
            walk.record(request, replace(started, run_dir=request.run_dir))
    else:
        flying.append(started)


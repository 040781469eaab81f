"""The campaign loop and the one way a control is launched and its outcome recorded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.base.catalogue import HARNESS_ERROR
from harness.base.errors import HarnessError
from harness.driver.plan import Executor, LaunchRequest, Outcome, Recorder, Source
from harness.driver.policy import STOP_POLICY, stop_reason
from harness.measure.ui import Reporter


def crashed(request: LaunchRequest, e: Exception) -> Outcome:
    """The outcome recorded for a launch that raised: failed, naming the error's rule."""
    if isinstance(e, HarnessError):
        return Outcome(request.run_dir, "failed", e.code,
                       (f"{e.rule or HARNESS_ERROR}: {e.message}",), True, e)
    return Outcome(request.run_dir, "failed", 1,
                   (f"{HARNESS_ERROR}: {type(e).__name__}: {e}",), True, e)


def run_one(request: LaunchRequest, executor: Executor, recorder: Recorder) -> Outcome:
    """Record the launch (durably), launch, record the outcome; return it.

    Nothing is lost: a launch that raises is still recorded (failed) before the error
    goes on up. An outcome carrying `error` is the caller's to raise or to stop on."""
    recorder.started(request)
    try:
        outcome = executor.launch(request)
    except Exception as e:
        recorder.finished(request, crashed(request, e))
        raise
    recorder.finished(request, outcome)
    return outcome


@dataclass
class Driven:
    """How a walk of the plan ended: why it stopped and every outcome, in order."""

    why: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def worst(self) -> int:
        return max((o.exit_code for o in self.outcomes), default=0)


def drive(source: Source, executor: Executor, *, stop_policy: str, ui: Reporter,
          raise_errors: bool, on_outcome: Callable[[Outcome], None] | None = None) -> Driven:
    """Launch the source's controls one by one until it is done or the stop policy stops it.

    `raise_errors`: a control the harness could not run raises its error (after it is
    recorded) instead of stopping the walk as `interrupted`."""
    driven = Driven("done")
    while True:
        request = source.next_launch()
        if isinstance(request, str):
            driven.why = request
            return driven
        outcome = run_one(request, executor, source)
        if outcome.error is not None and raise_errors:
            raise outcome.error
        driven.outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
        why = stop_reason(stop_policy, outcome.status, outcome.exit_code,
                          outcome.stop_requested, remote=outcome.remote)
        if why == STOP_POLICY:
            ui.event("stop-policy", policy=stop_policy, status=outcome.status)
        if why is not None:
            driven.why = why
            return driven

"""The one campaign loop, and the one way a launch is recorded around the executor.

`drive` keeps up to `executor.window` launches in flight, records each outcome (journal
first) as it arrives and asks the stop policy after each; once it stops, pending launches
are cancelled (not run: a journal plans them again) and running ones finish and seal.
The source is told which slots are `busy`: a slot in flight is `running` in the journal,
which it would otherwise take for a run a dead harness left. A `same_host` group run as
one (`together`) records each member `started` before the one job is submitted; so does a
launch of several of the plan's controls (`executor.per_job`: `next_launch`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from harness.base.catalogue import HARNESS_ERROR
from harness.base.errors import REFUSED, HarnessError
from harness.base.reason import Reason
from harness.base.slots import NotExecuted
from harness.base.states import Status
from harness.driver.plan import Executor, InFlight, LaunchRequest, LaunchSource, Outcome, Recorder
from harness.driver.policy import StoppedAfter, Why, not_executed, stop_reason
from harness.measure.ui import Reporter


def wants_more(taken: int, per_job: int) -> bool:
    """Whether a launch of `taken` runs takes the plan's next launch too (an executor that
    runs up to `per_job` of a slot's controls as one launch: a Slurm job whose next run
    waits on the host's GPU lock). Whole launches only: a same_host group is never split,
    so a launch may end up to a group's size past `per_job`. Pure."""
    return taken < per_job


def next_launch(source: LaunchSource, busy: frozenset[int], *, together: bool,
                per_job: int) -> tuple[tuple[LaunchRequest, ...], ...] | str:
    """The source's next launch, joined by the ones after it while `wants_more` (each
    launch's members apart); why there is none when there is none. Why the source stops
    giving more (done, a deadline) is asked again before the next launch, so it is not
    lost here."""
    first = source.next_launches(busy, together=together)
    if isinstance(first, str):
        return first
    taken = [first]
    while wants_more(sum(len(t) for t in taken), per_job):
        held = busy | {r.plan_index for t in taken for r in t if r.plan_index is not None}
        more = source.next_launches(frozenset(held), together=together)
        if isinstance(more, str):
            break
        taken.append(more)
    return tuple(taken)


def crashed(request: LaunchRequest, e: Exception) -> Outcome:
    """The outcome recorded for a launch that raised: failed, naming the error's rule."""
    if isinstance(e, HarnessError):
        return Outcome(request.run_dir, Status.FAILED, e.code,
                       (Reason(e.rule or HARNESS_ERROR, e.message),), True, e)
    return Outcome(request.run_dir, Status.FAILED, REFUSED,
                   (Reason(HARNESS_ERROR, f"{type(e).__name__}: {e}"),), True, e)


def run_one(request: LaunchRequest, executor: Executor, recorder: Recorder) -> Outcome:
    """Record the launch (durably), launch, record the outcome; return it. A launch that
    raises is still recorded (failed) before the error goes on up."""
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
    """How a walk ended: why, every outcome, what stopped it, and each slot left unrun."""

    why: Why | str
    outcomes: list[Outcome] = field(default_factory=list)
    after: StoppedAfter | None = None
    not_executed: tuple[NotExecuted, ...] = ()

    @property
    def worst(self) -> int:
        return max((o.exit_code for o in self.outcomes), default=0)


class _Walk:
    """One walk's state: what flies, why it stops, every outcome."""

    def __init__(self, source: LaunchSource, stop_policy: str, ui: Reporter,
                 on_outcome: Callable[[Outcome], None] | None, raise_errors: bool) -> None:
        self.source, self.stop_policy, self.ui = source, stop_policy, ui
        self.on_outcome, self.raise_errors = on_outcome, raise_errors
        self.driven = Driven(Why.DONE)
        self.stop: Why | str | None = None  # set once: nothing more is started
        self.flying: list[InFlight] = []
        self.given: dict[int, int] = {}  # id of a launch in flight -> members given so far

    def busy(self) -> frozenset[int]:
        return frozenset(r.plan_index for w in self.flying for r in w.requests
                         if r.plan_index is not None)

    def keep_open(self, given: list[InFlight]) -> None:
        """Keep in flight the launches that still owe a member's outcome."""
        for w in given:
            self.given[id(w)] = self.given.get(id(w), 0) + 1
        ended = [w for w in self.flying if self.given.get(id(w), 0) >= len(w.requests)]
        for w in ended:
            del self.given[id(w)]
        self.flying = [w for w in self.flying if not any(w is e for e in ended)]

    def record(self, request: LaunchRequest, outcome: Outcome) -> None:
        """Record the outcome (journal first), then ask the stop policy; with `raise_errors`
        a harness error is raised once recorded."""
        self.source.finished(request, outcome)
        if outcome.error is not None and self.raise_errors:
            raise outcome.error
        self.driven.outcomes.append(outcome)
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        why = stop_reason(self.stop_policy, outcome)
        if why is not None and self.stop is None:
            if why == Why.STOP_POLICY:
                self.ui.event("stop-policy", policy=self.stop_policy, status=outcome.status)
            self.stop = why
            self.driven.after = StoppedAfter(request.control, outcome.status,
                                             tuple(r.rule for r in outcome.reasons))

    def start(self, executor: Executor, launches: tuple[tuple[LaunchRequest, ...], ...],
              ) -> None:
        """Record every member `started` (committed before the launch exists), then start
        the launches as one; an outcome at once (it never started) is every member's of the
        first launch (a same_host group's too), and the later launches are not run."""
        requests = tuple(r for launch in launches for r in launch)
        for request in requests:
            self.source.started(request)
        try:
            started = executor.start(requests)
        except Exception as e:
            for request in requests:
                self.source.finished(request, crashed(request, e))
            raise
        if isinstance(started, Outcome):  # never started: the first launch's outcome
            for request in launches[0]:
                self.record(request, replace(started, run_dir=request.run_dir))
            for launch in launches[1:]:
                for request in launch:
                    self.source.withdrawn(request, f"not run: the job it shared with "
                                          f"{requests[0].control} was not started")
        else:
            self.flying.append(started)


def drive(source: LaunchSource, executor: Executor, *, stop_policy: str, ui: Reporter,
          raise_errors: bool = False, on_outcome: Callable[[Outcome], None] | None = None,
          deadline: str | None = None) -> Driven:
    """Keep up to `executor.window` launches in flight until the plan is done or the walk
    stops. `raise_errors`: raise a control's harness error (once recorded) instead of
    stopping as interrupted; `deadline`: what set it, named where controls are left unrun."""
    walk = _Walk(source, stop_policy, ui, on_outcome, raise_errors)
    last: Why | str = Why.DONE
    changed = True
    while True:
        if walk.stop is None and walk.flying and source.past_deadline():
            walk.stop = Why.DEADLINE  # a full window waits no longer for a slot to free
        while walk.stop is None and len(walk.flying) < max(1, executor.window):
            requests = next_launch(source, walk.busy(), together=executor.together,
                                   per_job=executor.per_job)
            if isinstance(requests, str):
                last = requests
                if requests != Why.DONE:  # deadline, environment: stop, cancel what waits
                    walk.stop = requests
                break
            walk.start(executor, requests)
        if walk.stop is not None and walk.flying:
            executor.cancel_pending(walk.flying)  # only those never started; once each
        if not walk.flying:
            driven = walk.driven
            driven.why = walk.stop or last
            driven.not_executed = not_executed(source.left(), driven.why, stop_policy,
                                               driven.after, deadline)
            return driven
        executor.pause(changed, max(w.failures for w in walk.flying))
        done, changed = executor.poll(walk.flying)
        for _, request, outcome in done:
            if outcome is None:  # cancelled while pending, or its claim was the controller's
                why = walk.stop or "its --deadline passed, or its host stopped it"
                source.withdrawn(request, f"not run: it never launched ({why})")
            else:
                walk.record(request, outcome)
        walk.keep_open([w for w, _, _ in done])

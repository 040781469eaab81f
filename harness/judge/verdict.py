"""Where a run's status is decided: a pure function of what was measured and judged.

Every reason names its rule and who found it, so a refusal traces to one check.
Precedence: preflight refusal, interrupted, timed-out, failed, refused, else accepted."""

from __future__ import annotations

from harness.base.catalogue import NOT_LAUNCHED, POST_REFUSED, RUN_INTERRUPTED
from harness.base.reason import Reason
from harness.base.states import Status, Verdict
from harness.judge.poststeps import exitcode
from harness.judge.verdictfile import PostResult


def post_reasons(p: PostResult) -> list[Reason]:
    """A refusing post-step's reasons, each under the rule id the step named."""
    if p.exit_code == 0 and p.verdict != Verdict.REFUSED:
        return []
    return list(p.reasons) or [Reason(POST_REFUSED, f"exited {p.exit_code}", p.name)]


def decide(*, preflight: list[Reason], outcome: dict | None, post: list[PostResult],
           after: list[Reason]) -> tuple[Status, list[Reason]]:
    """(status, reasons) for one run. `outcome` is None when nothing was launched."""
    reasons = list(preflight)
    if preflight or outcome is None:
        stopped = any(r.rule == RUN_INTERRUPTED for r in preflight)
        return (Status.INTERRUPTED if stopped else Status.REFUSED), (
            reasons or [Reason(NOT_LAUNCHED, "no container was started")])
    status, found = exitcode.judge_exit(outcome)  # the one judge of a container's exit
    reasons += found
    # The `exit-code` post-step runs this same judge of the exit: what it finds again (an
    # interrupted run's RUN-INTERRUPTED) is one finding, listed once.
    same = {(r.rule, r.detail) for r in found}
    for p in post:  # a judge refuses by its exit code, or by saying so in its verdict
        reasons += [r for r in post_reasons(p) if (r.rule, r.detail) not in same]
    reasons += after
    if status == Status.ACCEPTED and reasons:
        status = Status.REFUSED
    return status, reasons


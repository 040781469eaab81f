"""Where a run's status is decided: a pure function of what was measured and judged.

Every reason names its rule (MLPerf's checker) and who found it (`by`: the harness, or the
post-step by name), so a refusal can be traced to one check. A post-step's own rule ids
(`GATE0-FIELD-DIFFERS`) are kept as its reasons' rules, never folded into `POST-<name>`.
Status precedence: a preflight refusal, then interrupted, timed-out, failed (the
container itself), then refused (a judge, or a seal that changed), else accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.catalogue import NOT_LAUNCHED, POST_REFUSED, RUN_INTERRUPTED
from harness.base.reason import Reason
from harness.judge.poststeps import exitcode


@dataclass(frozen=True)
class PostResult:
    name: str
    exit_code: int | None
    verdict: str | None
    reasons: tuple[str, ...] = ()


def judge_exit(outcome: dict) -> tuple[str, list[Reason]]:
    """The one judge of a container's exit (`poststeps.exitcode.judge_exit`, which the
    `exit-code` post-step runs too), as (status it implies, reasons)."""
    status, found = exitcode.judge_exit(outcome)
    return status, [Reason(rule, detail) for rule, detail in found]


def post_reasons(p: PostResult) -> list[Reason]:
    """A refusing post-step's reasons, each under the rule id the step named."""
    if p.exit_code == 0 and p.verdict != "refused":
        return []
    found = [Reason.of(item, by=p.name, default_rule=POST_REFUSED) for item in p.reasons]
    return found or [Reason(POST_REFUSED, f"exited {p.exit_code}", p.name)]


def decide(*, preflight: list[Reason], outcome: dict | None, post: list[PostResult],
           after: list[Reason]) -> tuple[str, list[Reason]]:
    """(status, reasons) for one run. `outcome` is None when nothing was launched."""
    reasons = list(preflight)
    if preflight or outcome is None:
        stopped = any(r.rule == RUN_INTERRUPTED for r in preflight)
        return ("interrupted" if stopped else "refused"), (
            reasons or [Reason(NOT_LAUNCHED, "no container was started")])
    status, found = judge_exit(outcome)
    reasons += found
    for p in post:  # a judge refuses by its exit code, or by saying so in its verdict
        reasons += post_reasons(p)
    reasons += after
    if status == "accepted" and len(reasons) > 0:
        status = "refused"
    return status, reasons


def record_reasons(reasons: list[Reason]) -> tuple[list[dict[str, str]], list[str]]:
    """run.json's `reasons` (structured) and `rules` (the ids that refused, sorted)."""
    return [r.as_dict() for r in reasons], sorted({r.rule for r in reasons})


def lines(reasons: list[Reason]) -> tuple[str, ...]:
    """The reasons as text for a journal or a screen, the harness's environment reasons
    first: a journal line begins with `ENV-` exactly when the run exited 3 (see
    `night.rules.environment_reason`), whatever the other reasons' details say."""
    ordered = sorted(reasons, key=lambda r: not r.environment)
    return tuple(str(r) for r in ordered)

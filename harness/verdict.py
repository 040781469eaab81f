"""Where a run's status is decided: a pure function of what was measured and judged.

Every reason names its rule (MLPerf's checker), so a refusal can be traced to one check.
Status precedence: a preflight refusal, then interrupted, timed-out, failed (the
container itself), then refused (a judge, or a seal that changed), else accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ("accepted", "refused", "failed", "timed-out", "interrupted")


@dataclass(frozen=True)
class Reason:
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"

    @property
    def environment(self) -> bool:
        return self.rule.startswith("ENV-")


@dataclass(frozen=True)
class PostResult:
    name: str
    exit_code: int | None
    verdict: str | None
    reasons: tuple[str, ...] = ()


def decide(*, preflight: list[Reason], outcome: dict | None, post: list[PostResult],
           after: list[Reason]) -> tuple[str, list[Reason]]:
    """(status, reasons) for one run. `outcome` is None when nothing was launched."""
    reasons = list(preflight)
    if preflight or outcome is None:
        stopped = any(r.rule == "RUN-INTERRUPTED" for r in preflight)
        return ("interrupted" if stopped else "refused"), (
            reasons or [Reason("NOT-LAUNCHED", "no container was started")])
    status = "accepted"
    if outcome.get("interrupted"):
        status = "interrupted"
        reasons.append(Reason("RUN-INTERRUPTED", "the harness was stopped during the run"))
    elif outcome.get("timed_out"):
        status = "timed-out"
        reasons.append(Reason("RUN-TIMEOUT", "the container ran past its timeout"))
    elif outcome.get("oom_killed"):
        status = "failed"
        reasons.append(Reason("RUN-OOM", "the container was killed for memory"))
    elif outcome.get("exit_code") != 0:
        status = "failed"
        reasons.append(Reason("RUN-EXIT", f"the container exited {outcome.get('exit_code')}"))
    for p in post:  # a judge refuses by its exit code, or by saying so in its verdict
        if p.exit_code != 0 or p.verdict == "refused":
            detail = "; ".join(p.reasons) or f"exited {p.exit_code}"
            reasons.append(Reason(f"POST-{p.name}", detail))
    reasons += after
    if status == "accepted" and len(reasons) > 0:
        status = "refused"
    return status, reasons


def exit_code(status: str, reasons: list[Reason]) -> int:
    """0 accepted; 3 when the host was at fault (engine, lock, image, device); else 1."""
    if status == "accepted":
        return 0
    if any(r.environment for r in reasons):
        return 3
    return 1

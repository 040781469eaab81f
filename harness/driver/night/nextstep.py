"""Which step the night loop takes next, as a pure function over journal rows. The
journal's legal moves are the night folder's (`measure.nightfolder.transitions`); what
runs next also depends on the campaign's retry policy, so it is decided here."""

from __future__ import annotations

from collections.abc import Sequence

from harness.base.states import State
from harness.driver.policy import RetryPolicy, retry_allowed
from harness.measure.nightfolder.rows import RERUN, Row, latest_attempts
from harness.measure.nightfolder.transitions import Step


def next_step(rows: Sequence[Row], policy: RetryPolicy) -> Step:
    """The one next step of the night loop. Pure. In order: interrupt a stale `running`
    row; retry the earliest interrupted slot the policy allows; launch the earliest `planned`
    row (a confirmation rerun only once no planned control is left); else done."""
    ordered = sorted(rows, key=lambda r: (r.plan_index, r.attempt))
    for row in ordered:
        if row.state == State.RUNNING:
            return Step("interrupt", row)
    latest = latest_attempts(ordered)
    for plan_index in sorted(latest):
        row = latest[plan_index]
        if retry_allowed(policy, row.state, row.attempt):
            return Step("retry", row)
    planned = [latest[i] for i in sorted(latest) if latest[i].state == State.PLANNED]
    if planned:  # min keeps the first of equals: plan order among controls, among reruns
        return Step("launch", min(planned, key=lambda r: r.origin == RERUN))
    return Step("done")

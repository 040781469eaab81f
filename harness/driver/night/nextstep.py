"""Which step the night loop takes next, as a pure function over journal rows.

The journal's own moves (which state changes are legal, what a fresh start does with rows
a dead harness left) are the night folder's (`harness.measure.nightfolder.transitions`);
what runs next also depends on the campaign's retry policy, so it is decided here, by the
driver, and carried out through `Journal.apply`.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.base.states import State
from harness.driver.policy import RetryPolicy, retry_allowed
from harness.measure.nightfolder.rows import RERUN, Row, latest_attempts
from harness.measure.nightfolder.transitions import Step


def next_step(rows: Sequence[Row], policy: RetryPolicy) -> Step:
    """The one next step of the night loop. Pure.

    Order: a stale `running` row is interrupted first; then the earliest interrupted slot
    that the policy lets retry gets a new attempt; then the earliest `planned` row is
    launched, a rerun's (a night's confirmation rerun) only once no planned control is
    left; otherwise the night is done. Finished rows are never chosen, and a slot
    whose newest attempt is terminal is never run again.
    """
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

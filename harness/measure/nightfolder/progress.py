"""How far a night is, from its journal rows: the one count the night's own lines and
`harness status` both print. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from harness.base.states import TERMINAL
from harness.measure.nightfolder.rows import Row, latest_attempts


def progress(rows: Sequence[Row]) -> dict:
    """{"done", "total", "states": {state: count}} over the newest attempt of each slot.

    "done" is a slot whose newest attempt has a verdict (accepted, refused, failed, timed
    out). It does not depend on the retry policy: `harness status` reads a journal without
    the campaign, and counting an interrupted slot as done only when no retry is left made
    the night say "1/3 done" where status said "2/3 done" for the same rows. An interrupted
    slot is never done (its state says it was interrupted, and whether it runs again is the
    night's `unfinished`, harness.driver.night.rules)."""
    latest = latest_attempts(rows).values()
    states: dict[str, int] = {}
    for r in latest:
        states[str(r.state)] = states.get(str(r.state), 0) + 1
    return {"done": sum(r.state in TERMINAL for r in latest), "total": len(latest),
            "states": dict(sorted(states.items()))}

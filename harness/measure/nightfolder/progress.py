"""How far a night is: the one count the night's lines and `harness status` print. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from harness.base.states import TERMINAL
from harness.measure.nightfolder.rows import Row, latest_attempts


def progress(rows: Sequence[Row]) -> dict:
    """{"done", "total", "states": {state: count}} over the newest attempt of each slot.

    "done" means a verdict, whatever the retry policy: `harness status` reads a journal
    without the campaign and must count as the night does; interrupted is never done."""
    latest = latest_attempts(rows).values()
    states: dict[str, int] = {}
    for r in latest:
        states[str(r.state)] = states.get(str(r.state), 0) + 1
    return {"done": sum(r.state in TERMINAL for r in latest), "total": len(latest),
            "states": dict(sorted(states.items()))}

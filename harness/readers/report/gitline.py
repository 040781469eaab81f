"""A run's git provenance (run.json "provenance") as one line of inert text.

The commit is never cut, so a reader can `git show` it. Paths come from the project tree
and may hold a newline or an ESC: each is made inert alone, so none can forge a row."""

from __future__ import annotations

from typing import Any

from harness.readers.report.inert import inert

SHOWN_PATHS = 5
MAX_PATH_CHARS = 120


def git_line(provenance: dict[str, Any] | None, shown: int = SHOWN_PATHS) -> str:
    """The line `harness show`, the morning report and bundles print for a run's git state."""
    if provenance is None:
        return "not recorded"
    commit = provenance.get("commit")
    head = inert(commit, 64) if isinstance(commit, str) else "no commit"
    dirty, error = provenance.get("dirty"), provenance.get("error")
    if dirty is None:
        return f"{head} (state unknown: {inert(error, 300) if error else 'not recorded'})"
    own = provenance.get("own_approval")  # the run's own new approval: no change of it
    if not dirty:
        aside = (f"; its own approval {inert(own, MAX_PATH_CHARS)} not yet committed"
                 if isinstance(own, str) else "")
        return f"{head} (clean{aside})"
    changed = [p for p in provenance.get("changed") or [] if isinstance(p, str)]
    total = provenance.get("changed_total")
    total = total if isinstance(total, int) and not isinstance(total, bool) else len(changed)
    names = ", ".join(inert(p, MAX_PATH_CHARS).replace(",", "\\x2c") for p in changed[:shown])
    more = ", …" if total > min(len(changed), shown) else ""
    return f"{head} dirty: {total} changed ({names}{more})"

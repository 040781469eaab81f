"""The phases of a run that evidence is gathered in, and what a witness of the launch sees.
`measure.execute` calls back at the four around the container.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFLIGHT = "preflight"
LOCKED = "locked"
LAUNCHED = "launched"  # the docker CLI process exists; nothing else has happened yet
STARTED = "started"  # the container has an Id and has left the `created` state
DURING = "during"  # begun once it started, ended once it exited (a sampler)
EXITED = "exited"  # the launcher has exited (the container stopped)
SEAL = "seal"
PHASES = (PREFLIGHT, LOCKED, LAUNCHED, STARTED, DURING, EXITED, SEAL)


@dataclass(frozen=True)
class Subject:
    """What a witness may look at: the launcher's pid, then the container's Id; `program`
    (the docker CLI's path) is what the launcher witness waits for it to exec."""

    launcher_pid: int
    container_id: str | None = None
    secret_names: frozenset[str] = frozenset()
    program: str | None = None
    argv: tuple[str, ...] = ()

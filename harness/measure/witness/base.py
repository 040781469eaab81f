"""The one interface every witness implements (as in-toto witness's attestors).

A witness observes; it never judges. It is taken at one moment of the launch, is given the
same `Subject` as every other witness, and returns one JSON document that the pipeline
writes to its own file in the run folder. Adding a kind of evidence is adding a module
with one such object and listing it in `harness.measure.witness.WITNESSES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

LAUNCHED = "launched"  # the docker CLI process exists; nothing else has happened yet
STARTED = "started"  # the container has an Id and has left the `created` state
MOMENTS = (LAUNCHED, STARTED)


@dataclass(frozen=True)
class Subject:
    """What a witness may look at: the launcher's pid, then the container's Id. `program`
    is the real path of the binary the launcher was started to run (the docker CLI): the
    launcher witness waits until the process runs it, so it never records the moment
    between fork and exec."""

    launcher_pid: int
    container_id: str | None = None
    secret_names: frozenset[str] = frozenset()
    program: str | None = None


class Witness(Protocol):
    name: str  # short and stable: "launcher", "container"
    moment: str  # one of MOMENTS
    file: str  # the run-folder file its document goes to

    def collect(self, subject: Subject) -> dict: ...

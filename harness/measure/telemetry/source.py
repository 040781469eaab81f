"""What every telemetry source is: a name and a `read` of its figures now.

Like a witness, each kind of telemetry is a small plug-in with one interface; the sampler
knows none of them. `read` returns `{source name: {quantity: value}}` (quantities from
`telemetry.quantities`, None where the source says "not available"); it may return several
sources at once (one per GPU). It raises `Gone` when what it reads no longer exists (the
container's cgroup after exit), which ends the sampling, and any other exception for a
failed read, which the sampler records as a missed sample.
"""

from __future__ import annotations

from typing import Protocol

Figures = dict[str, dict[str, float | None]]


class Gone(Exception):
    """What the source reads has gone (the container exited): sampling ends."""


class Source(Protocol):
    name: str

    def read(self) -> Figures: ...

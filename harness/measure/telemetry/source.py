"""What every telemetry source is: a name and a `read` of its figures now.

`read` returns `{source name: {quantity: value}}` (None: not available), perhaps several
sources (one per GPU); it raises `Gone` to end the sampling, anything else is a missed sample."""

from __future__ import annotations

from typing import Protocol

Figures = dict[str, dict[str, float | None]]


class Gone(Exception):
    """What the source reads has gone (the container exited): sampling ends."""


class Source(Protocol):
    name: str

    def read(self) -> Figures: ...

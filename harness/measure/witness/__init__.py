"""Witnesses: each kind of evidence about what ran is a small plug-in with one interface.

See `harness.measure.witness.base`: a witness has a name, the moment it is taken, the file its
document goes to, and `collect(subject) -> dict`. `take` runs every registered witness of
one moment and writes each document; a witness that raises is recorded as an error
document under its own name, so one broken witness never loses the others' evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.measure.witness import container, launcher
from harness.measure.witness.base import LAUNCHED, MOMENTS, STARTED, Subject, Witness

WITNESSES: tuple[Witness, ...] = (launcher.WITNESS, container.WITNESS)

__all__ = ["LAUNCHED", "MOMENTS", "STARTED", "WITNESSES", "Subject", "Witness", "take"]


def take(moment: str, subject: Subject, run_dir: Path,
         write: Callable[[Path, dict], None],
         witnesses: tuple[Witness, ...] = WITNESSES) -> dict[str, dict]:
    """Collect and write every witness of `moment`; return {name: document}."""
    if moment not in MOMENTS:
        raise ValueError(f"unknown witness moment {moment!r}")
    taken: dict[str, dict] = {}
    for w in witnesses:
        if w.moment != moment:
            continue
        try:
            doc = w.collect(subject)
        except Exception as e:  # a witness observes; its failure is evidence too
            doc = {"schema": f"harness.measure.witness.{w.name}/v1",
                   "error": f"{type(e).__name__}: {e}"[:500]}
        write(run_dir / w.file, doc)
        taken[w.name] = doc
    return taken

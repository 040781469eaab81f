"""Observation documents for tests that build run folders by hand.

A real run's instrument observes every process that holds the engine configuration (the
engine core, the front-end, each worker: harness.judge.finalize.processes). A test that writes
only the engine core's pair gets it refused for the processes it left out; these helpers
write the rest as a one-process engine would (every process the same configuration), so
the test judges what it means to.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from harness.instrument.harness_observer.interface import (
    ENGINE_CORE,
    FRONTEND,
    WORKER,
    document_name,
)

LAYOUT = {"parallel.tensor_parallel_size": 1, "parallel.pipeline_parallel_size": 1}


def as_process(doc: Any, kind: str, rank: int = 0) -> Any:
    """A copy of `doc` said to be of process `kind` (non-dict documents stay as they are)."""
    if not isinstance(doc, dict):
        return doc
    out = copy.deepcopy(doc)
    if isinstance(out.get("process"), dict):
        out["process"] = {**out["process"], "kind": kind, "rank": rank}
    return out


def engine_core(doc: Any) -> Any:
    """The engine core's document: its kind, and the one-worker layout when it has none."""
    out = as_process(doc, ENGINE_CORE)
    if isinstance(out, dict) and isinstance(out.get("fields"), dict):
        out["fields"] = {**LAYOUT, **out["fields"]}
    return out


def companions(startup: Any, generation: Any) -> dict[str, Any]:
    """File name -> document of the front-end's and worker 0's pairs."""
    out = {}
    for phase, doc in (("startup", startup), ("generation", generation)):
        if doc is None:
            continue
        base = engine_core(doc)
        out[document_name(FRONTEND, phase)] = as_process(base, FRONTEND)
        out[document_name(WORKER, phase, 0)] = as_process(base, WORKER, 0)
    return out


def write_companions(observations: Path, startup: Any, generation: Any) -> None:
    for name, doc in companions(startup, generation).items():
        (observations / name).write_text(doc if isinstance(doc, str) else json.dumps(doc))

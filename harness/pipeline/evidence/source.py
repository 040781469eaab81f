"""The one shape of evidence gathered around a run (as in-toto witness's attestors). A
source never decides what its own failure means: `pipeline.evidence.gather` does, for
every source alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.base.catalogue import HARNESS_ERROR
from harness.base.reason import Reason
from harness.config.schema import Control
from harness.measure.witness.subject import PHASES, Subject
from harness.pipeline.context import RunContext

PREFLIGHT, LOCKED, LAUNCHED, STARTED, DURING, EXITED, SEAL = PHASES  # in the order they pass


@dataclass(frozen=True)
class Gathered:
    """What one source found: `doc` for its file (None: nothing written), `reasons` that
    refuse, and `held` for a later phase (for a DURING source: the callable that ends it)."""

    doc: Any = None
    reasons: tuple[Reason, ...] = ()
    held: Any = None


@dataclass(frozen=True)
class Scene:
    """What a source may look at: the run, what earlier sources gathered, the subject."""

    ctx: RunContext
    gathered: Mapping[str, Gathered] = field(default_factory=dict)
    subject: Subject | None = None


@dataclass(frozen=True)
class Evidence:
    """One source. `file`: its own run-folder file, `<doc>#<key>` for a block of a document
    the pipeline writes, or None. When `collect` raises, `failed(why)` is its document, and
    `rule` refuses only where `required(control)`."""

    name: str
    phase: str
    file: str | None
    collect: Callable[[Scene], Gathered]
    required: Callable[[Control], bool] = lambda _control: False
    rule: str = HARNESS_ERROR
    hint: str = ""  # what to do about a failure, appended to the refusal
    failed: Callable[[str], Any] = lambda why: {"error": why}

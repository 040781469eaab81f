"""run.json, the run record: one typed shape, one writer, one tolerant reader.

Two paths write a record (a finished run, `harness.pipeline.finish`; a run cut off and
sealed by recovery, `harness.pipeline.recover`), and both go through `write`, so every
record has one shape. Every reader (show, report, bundles, rerun, refinalize, recovery)
goes through `read`, because a record may have been damaged or forged after sealing: it is
read like any hostile input, a regular file only (no FIFO, no symlink), size-capped,
strict JSON, an object, not nested deeper than a run record ever is, of a run record's
shape (`runfolder.shape`). Anything else is invalid input (exit 2). `raw` keeps the file
as it is for display.

Schema harness.run/v2: `reasons` are objects {"rule", "by", "detail"} (`by` is "harness"
or the post-step that refused) and `rules` the sorted ids that refused. Records of
harness.run/v1 (reasons as "RULE: detail" strings, a post-step's as
"POST-<name>: detail") read in the v2 shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.atomic import write_json
from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_text_bounded
from harness.base.reason import Reason, rules
from harness.base.states import STATUSES, Status
from harness.instrument.harness_observer.encode import deeper_than
from harness.measure.runfolder import shape
from harness.measure.runfolder.layout import RECORD

SCHEMA = "harness.run/v2"
SCHEMA_V1 = "harness.run/v1"
RECORD_LIMIT = 16 * 1024 * 1024
MAX_DEPTH = 32  # run.json is 3 levels deep; deeper is not a run record

Loads = Callable[[Any], Any]


@dataclass(frozen=True)
class RunRecord:
    """One run's record: its status and reasons typed, as every seam carries them. Nested
    parts stay plain dicts: they are small, and each is read by one or two callers that
    check the keys they use."""

    run_id: str | None
    status: Status | None
    reasons: tuple[Reason, ...] = ()
    rules: list[str] = field(default_factory=list)
    attempt: int | None = None
    campaign: dict[str, Any] | None = None  # name, file, row
    control: dict[str, Any] | None = None  # name, file, device
    image: dict[str, Any] = field(default_factory=lambda: {"name": None, "id": None})
    seal: str | None = None  # the source seal, "sha256:<hex>"
    model_hashes: dict[str, Any] = field(default_factory=dict)
    times: dict[str, Any] = field(default_factory=dict)  # created, started, ended, sealed
    lock: dict[str, Any] | None = None
    outcome: dict[str, Any] = field(default_factory=dict)
    post_steps: list[dict[str, Any]] = field(default_factory=list)
    rerun_of: dict[str, Any] | None = None
    recovered: dict[str, Any] | None = None  # only a record written by recovery
    # each stage that ran: name, result (ok, refused, error, interrupted), seconds, rules
    stages: list[dict[str, Any]] | None = None
    # the project's git state at preflight: commit, dirty, changed, changed_total, error
    provenance: dict[str, Any] | None = None
    # the harness that made it (provenance.harness_state): distribution, version, origin
    harness: dict[str, Any] | None = None
    # the approval it ran under (require_approval): file, digest, seal, commit reviewed
    approval: dict[str, Any] | None = None
    # the Slurm job it ran in (harness.measure.slurm.identity): job_id, token, node, gpus
    slurm: dict[str, Any] | None = None
    # what was sampled while the container ran (pipeline.bracket): figures, gaps, energy
    telemetry: dict[str, Any] | None = None
    # the kernel log from the lock to the seal: where from, readable, lines, faults
    kernel_log: dict[str, Any] | None = None
    schema: str = SCHEMA
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The record as written to run.json (`raw` is never written)."""
        doc = {
            "schema": self.schema, "run_id": self.run_id, "attempt": self.attempt,
            "campaign": self.campaign, "control": self.control, "image": self.image,
            "seal": self.seal, "model_hashes": self.model_hashes, "status": self.status,
            "reasons": [r.as_dict() for r in self.reasons], "rules": self.rules,
            "times": self.times,
            "lock": self.lock, "outcome": self.outcome, "post_steps": self.post_steps,
            "rerun_of": self.rerun_of,
        }
        if self.recovered is not None:
            doc["recovered"] = self.recovered
        if self.stages is not None:
            doc["stages"] = self.stages
        if self.provenance is not None:
            doc["provenance"] = self.provenance
        if self.harness is not None:
            doc["harness"] = self.harness
        if self.approval is not None:
            doc["approval"] = self.approval
        if self.slurm is not None:
            doc["slurm"] = self.slurm
        if self.telemetry is not None:
            doc["telemetry"] = self.telemetry
        if self.kernel_log is not None:
            doc["kernel_log"] = self.kernel_log
        return doc

    def view(self) -> dict[str, Any]:
        """The file as read, for display: every value as it is (odd ones included), except
        that a list of reasons is in the v2 shape and a v1 record's rules follow them."""
        doc = dict(self.raw)
        if isinstance(doc.get("reasons"), list):
            doc["reasons"] = [r.as_dict() for r in self.reasons]
            if doc.get("schema") == SCHEMA_V1:
                doc["rules"] = self.rules
        return doc


def write(run_dir: Path, record: RunRecord) -> None:
    """Write run.json: exclusive (an existing record is never replaced) and atomic."""
    write_json(Path(run_dir) / RECORD, record.as_dict(), exclusive=True)


def parse(data: str | bytes, where: str, loads: Loads = json.loads) -> dict[str, Any]:
    """A run record's bytes as a dict: strict JSON, an object, not too deep; InvalidInput
    (exit 2) naming `where` otherwise. For bytes already read (and checked) elsewhere.
    `loads` may be stricter than json.loads (a bundle refuses NaN and duplicate keys); a
    ValueError it raises is invalid input."""
    try:
        doc = loads(data)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{where}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    except (ValueError, RecursionError) as e:  # a >4300-digit integer; nesting past the stack
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise InvalidInput(f"{where}: not valid JSON ({why})") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: not a run record (a JSON {type(doc).__name__}, "
                           "not an object)")
    if deeper_than(data, doc, MAX_DEPTH):
        raise InvalidInput(f"{where}: not a run record (nested deeper than {MAX_DEPTH} levels)")
    return doc


def load(run_dir: Path, loads: Loads = json.loads) -> dict[str, Any]:
    """run.json as a dict: a regular file only, bounded, then `parse`; InvalidInput (exit
    2) for anything else."""
    path = Path(run_dir) / RECORD
    try:
        text = read_text_bounded(path, RECORD_LIMIT, what="run record")
    except InputError as e:
        raise InvalidInput(f"{run_dir}: no readable {RECORD} ({e.message})") from None
    return parse(text, str(path), loads)


def _of(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = doc.get(key)
    return value if isinstance(value, kind) else default


def provenance_of(value: Any) -> dict[str, Any] | None:
    """A record's "provenance" in its one shape, each field of the wrong type read as
    absent; None when it is not an object (older records have none)."""
    if not isinstance(value, dict):
        return None
    commit, dirty, error = value.get("commit"), value.get("dirty"), value.get("error")
    changed = [p for p in _of(value, "changed", list, []) if isinstance(p, str)]
    total = value.get("changed_total")
    total_ok = isinstance(total, int) and not isinstance(total, bool) and total >= 0
    return {"commit": commit if isinstance(commit, str) else None,
            "dirty": dirty if isinstance(dirty, bool) else None, "changed": changed,
            "changed_total": total if total_ok else len(changed),
            "error": error if isinstance(error, str) else None}


def status_of(value: Any) -> Status | None:
    """A record's status word as a `Status`; None for anything else (older or damaged
    records: `runfolder.shape` names the fault where one is checked)."""
    return Status(value) if isinstance(value, str) and value in STATUSES else None


def from_dict(doc: dict[str, Any]) -> RunRecord:
    """The typed record of a parsed run.json, v1 or v2; a field of the wrong type reads
    as absent (the caller still has `raw`)."""
    raw_reasons = doc.get("reasons")
    reasons = tuple(Reason.of(r) for r in raw_reasons) if isinstance(raw_reasons, list) else ()
    stored = _of(doc, "rules", list, [])
    if doc.get("schema") == SCHEMA_V1 or not all(isinstance(r, str) for r in stored):
        stored = rules(reasons)
    attempt = doc.get("attempt")
    return RunRecord(
        run_id=_of(doc, "run_id", str), status=status_of(doc.get("status")),
        reasons=reasons, rules=list(stored),
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
        campaign=_of(doc, "campaign", dict), control=_of(doc, "control", dict),
        image=_of(doc, "image", dict, {"name": None, "id": None}),
        seal=_of(doc, "seal", str), model_hashes=_of(doc, "model_hashes", dict, {}),
        times=_of(doc, "times", dict, {}), lock=_of(doc, "lock", dict),
        outcome=_of(doc, "outcome", dict, {}),
        post_steps=[p for p in _of(doc, "post_steps", list, []) if isinstance(p, dict)],
        rerun_of=_of(doc, "rerun_of", dict), recovered=_of(doc, "recovered", dict),
        stages=[s for s in _of(doc, "stages", list, []) if isinstance(s, dict)] or None,
        provenance=provenance_of(doc.get("provenance")), harness=_of(doc, "harness", dict),
        approval=_of(doc, "approval", dict), slurm=_of(doc, "slurm", dict),
        telemetry=_of(doc, "telemetry", dict), kernel_log=_of(doc, "kernel_log", dict),
        schema=_of(doc, "schema", str, ""), raw=doc)


def strict(doc: dict[str, Any], where: str) -> RunRecord:
    """The typed record of a parsed run.json that has a run record's shape
    (`runfolder.shape`); InvalidInput (exit 2) naming each fault otherwise."""
    bad = shape.problems(doc)
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise InvalidInput(f"{where}: not a run record: " + "; ".join(bad[:5]) + more,
                           faults=bad)
    return from_dict(doc)


def read(run_dir: Path, loads: Loads = json.loads) -> RunRecord:
    """The one reader of run.json: bounded, strict JSON, of a run record's shape (exit 2
    otherwise). It does not check the folder's seal: a command acting on a sealed run
    reads it through `runfolder.sealed.read_record`, which does."""
    return strict(load(run_dir, loads), str(Path(run_dir) / RECORD))

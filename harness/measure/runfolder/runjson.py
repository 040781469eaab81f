"""run.json, the run record: one typed shape, one writer (`write`), one tolerant reader.

Both a finished run and a run sealed by recovery write through `write`, so every record has
one shape. Every reader goes through `read`: a record may be damaged or forged after
sealing, so it is read as hostile input (regular file, size-capped, strict JSON, bounded
depth, a run record's shape per `runfolder.shape`); anything else is exit 2. Schema v2's
`reasons` are {"rule", "by", "detail"}; v1 records ("RULE: detail" strings) read as v2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
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
OPTIONAL = ("recovered", "stages", "provenance", "harness", "approval", "slurm", "telemetry",
            "kernel_log")

Loads = Callable[[Any], Any]


@dataclass(frozen=True)
class RunRecord:
    """One run's record, status and reasons typed. Nested parts stay plain dicts: small, and
    each read by one or two callers that check the keys they use."""

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
    # what was sampled while the container ran (pipeline.evidence): figures, gaps, energy
    telemetry: dict[str, Any] | None = None
    # the kernel log from the lock to the seal: where from, readable, lines, faults
    kernel_log: dict[str, Any] | None = None
    schema: str = SCHEMA
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The record as written to run.json: `raw` never, an OPTIONAL part only where set
        (absent from records that never had it)."""
        doc = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "raw"}
        doc["reasons"] = [r.as_dict() for r in self.reasons]
        return {k: v for k, v in doc.items() if k not in OPTIONAL or v is not None}

    def view(self) -> dict[str, Any]:
        """The file as read, for display, its reasons (and a v1 record's rules) in v2 shape."""
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
    """Bytes already read as a run record's dict: strict JSON, an object, not too deep;
    InvalidInput naming `where` otherwise. `loads` may be stricter (a bundle's)."""
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
    """run.json as a dict: a bounded regular file, then `parse`; InvalidInput otherwise."""
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
    """A record's "provenance", each field of the wrong type absent; None if not an object."""
    if not isinstance(value, dict):
        return None
    commit, dirty, error = value.get("commit"), value.get("dirty"), value.get("error")
    changed = [p for p in _of(value, "changed", list, []) if isinstance(p, str)]
    total = value.get("changed_total")
    total_ok = isinstance(total, int) and not isinstance(total, bool) and total >= 0
    return {"commit": commit if isinstance(commit, str) else None,
            "dirty": dirty if isinstance(dirty, bool) else None, "changed": changed,
            "changed_total": total if total_ok else len(changed),
            "error": error if isinstance(error, str) else None,
            **({"own_approval": own} if isinstance(own := value.get("own_approval"), str)
               else {})}


def status_of(value: Any) -> Status | None:
    """A record's status word as a `Status`; None for anything else."""
    return Status(value) if isinstance(value, str) and value in STATUSES else None


def from_dict(doc: dict[str, Any]) -> RunRecord:
    """The typed record of a parsed run.json, v1 or v2; a field of the wrong type is absent."""
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
    """The typed record of a run.json of a run record's shape; InvalidInput naming faults."""
    bad = shape.problems(doc)
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise InvalidInput(f"{where}: not a run record: " + "; ".join(bad[:5]) + more,
                           faults=bad)
    return from_dict(doc)


def read(run_dir: Path, loads: Loads = json.loads) -> RunRecord:
    """The one reader of run.json. It does not check the seal: `sealed.read_record` does."""
    return strict(load(run_dir, loads), str(Path(run_dir) / RECORD))

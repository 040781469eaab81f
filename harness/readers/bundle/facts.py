"""What a bundle says about each run, read from the run folder's own records.

Any record may be absent or unreadable; the bundle says what was missing instead of guessing."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.errors import InvalidInput
from harness.base.timeutil import parse_or_none
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.layout import HOST_BEFORE, PREFLIGHT, RECORD, VECTOR
from harness.readers.bundle.records import BadMember, parse_json, read_text_member


@dataclass(frozen=True)
class RunFacts:
    """The records of one run that the bundle metadata is built from."""

    folder: str  # path of the run folder inside the bag, e.g. data/<run-id>
    record: dict[str, Any] = field(default_factory=dict)  # run.json
    argv: list[str] | None = None  # docker-vector.json
    host: dict[str, Any] | None = None  # host-before.json
    preflight: dict[str, Any] | None = None  # preflight.json: only the keys read below
    notes: list[str] = field(default_factory=list)  # absent or unreadable records

    @property
    def run_id(self) -> str:
        value = self.record.get("run_id")
        return value if isinstance(value, str) and value else self.folder.rsplit("/", 1)[-1]

    def get(self, *keys: str) -> Any:
        """A nested value of run.json, or None when any level is absent or not an object."""
        value: Any = self.record
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value

    def slim(self) -> RunFacts:
        """What is kept of every run while a bundle is written or checked: the run.json keys
        bag-info, the approval chain and the time span read, and the host's name. The statement's
        share is spooled run by run, so a bundle's memory does not grow by each run's records."""
        record = {k: self.record[k] for k in SLIM_KEYS if k in self.record}
        host = None if self.host is None else {
            k: v for k, v in self.host.items() if k in HOST_NAME_KEYS}
        return RunFacts(self.folder, record, host=host, notes=list(self.notes))


SLIM_KEYS = ("run_id", "campaign", "status", "image", "seal", "times", "approval",
             "control", "attempt", "rerun_of")  # the last three: the bag's run listing
HOST_NAME_KEYS = ("hostname", "host", "nodename", "node")  # the usual keys, in this order
PREFLIGHT_KEYS = ("model_hashes", "provenance")  # the keys of preflight.json a bundle uses
RECORD_LIMIT = 16 << 20
RECORD_DEPTH = 32  # run.json nests 3 deep; the statement adds about 6 around a record


def _load(run_dir: Path, name: str, notes: list[str]) -> Any:
    """A record's JSON, read beneath the run folder (bounded, strict), or None with a note.
    run.json goes through the one record reader, with the bundle's stricter JSON: no NaN, no
    duplicate keys, since the statement must be strict JSON."""
    if not os.path.lexists(run_dir / name):
        notes.append(f"{name} absent")
        return None
    try:
        if name == RECORD:
            return run_record.read(run_dir, lambda text: parse_json(text, RECORD_DEPTH)).view()
        return parse_json(read_text_member(run_dir, name, RECORD_LIMIT), RECORD_DEPTH)
    except (BadMember, InvalidInput) as e:
        notes.append(f"{name} unreadable: {e}")
        return None


def _as_dict(value: Any, name: str, notes: list[str]) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    notes.append(f"{name} is not a JSON object")
    return None


def read_run_facts(folder: str, run_dir: Path, record_only: bool = False) -> RunFacts:
    """Read one run folder's records, tolerating any that are absent or malformed. `record_only`:
    run.json alone, so verifying many runs' chains does not parse every preflight.json."""
    notes: list[str] = []
    record = _load(run_dir, RECORD, notes) or {}
    if record_only:
        return RunFacts(folder, record, notes=notes)
    vector = _as_dict(_load(run_dir, VECTOR, notes), VECTOR, notes)
    argv = vector.get("argv") if vector else None
    if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        notes.append(f"{VECTOR} argv is not a list of strings")
        argv = None
    host = _as_dict(_load(run_dir, HOST_BEFORE, notes), HOST_BEFORE, notes)
    preflight = _as_dict(_load(run_dir, PREFLIGHT, notes), PREFLIGHT, notes)
    if preflight is not None:  # the largest record by far; a bundle of many runs holds
        # every run's facts at once, so only what model_hashes and provenance read is kept
        preflight = {k: preflight[k] for k in PREFLIGHT_KEYS if k in preflight}
    return RunFacts(folder, record, argv, host, preflight, notes)


def time_span(runs: list[RunFacts]) -> tuple[str | None, str | None]:
    """Earliest start and latest end over the runs, as written in their run.json."""
    starts = [(t, s) for r in runs for s in [r.get("times", "started") or r.get("times", "created")]
              if (t := parse_or_none(s))]
    ends = [(t, s) for r in runs for s in [r.get("times", "ended")] if (t := parse_or_none(s))]
    start = min(starts)[1] if starts else None
    end = max(ends)[1] if ends else (max(starts)[1] if starts else None)
    return start, end


def host_name(facts: RunFacts) -> str | None:
    """The host's name from its identity snapshot, under whichever usual key it has."""
    for key in HOST_NAME_KEYS:
        value = (facts.host or {}).get(key)
        if isinstance(value, str) and value:
            return value
    return None


def model_hashes(facts: RunFacts) -> dict[str, str]:
    """Pinned model file hashes from run.json, else from preflight.json."""
    for source in (facts.record, facts.preflight or {}):
        value = source.get("model_hashes")
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
    return {}


def provenance(facts: RunFacts) -> dict[str, Any] | None:
    """The project's git state the run recorded, in its one shape; None when neither has one."""
    for source in (facts.record, facts.preflight or {}):
        value = run_record.provenance_of(source.get("provenance"))
        if value is not None:
            return value
    return None

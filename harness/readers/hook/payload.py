"""What a night's hook is given: one JSON document made from the night's summary.json.

The runs dir may be writable by others, so summary.json is read as hostile: a regular file
(no symlink), bounded, strict JSON, hashed as read so the digest sent is of the very bytes
the counts came from. The payload carries no credential (`send` takes them from the env)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.base.readfile import InputError
from harness.readers.bundle.records import BadMember, parse_json
from harness.readers.report.ending import SUMMARY_JSON, summary_bytes
from harness.readers.report.summary import SCHEMA as SUMMARY_SCHEMA

SCHEMA = "harness.night-hook/v1"
MAX_RUNS = 10_000
TEXT_LIMIT = 1000


class SummaryUnreadable(ValueError):
    """summary.json cannot be read as the night's summary; `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Summary:
    """The parts of summary.json a hook is given, checked, and the digest of its bytes."""

    headline: str
    attempts: str
    controls: dict
    counts: dict[str, int]
    regressions: list
    runs: list[dict]
    sha256: str
    not_executed: list[dict] = field(default_factory=list)  # slots left unrun, and why


@dataclass(frozen=True)
class Bundled:
    """The night's bundle as exported for the hook (`path` None: not exported, `error` why)."""

    path: str | None = None
    sha256: str | None = None
    error: str | None = None

    def record(self) -> dict | None:
        return None if self.path is None else {"path": self.path, "sha256": self.sha256}


def parse_summary(raw: bytes) -> Summary:
    """Pure: the checked summary in `raw` (summary.json's bytes); SummaryUnreadable why not."""
    try:
        doc = parse_json(raw.decode("utf-8"))
    except (BadMember, UnicodeDecodeError) as e:
        raise SummaryUnreadable(f"not JSON text ({e})"[:TEXT_LIMIT]) from None
    if not isinstance(doc, dict) or doc.get("schema") != SUMMARY_SCHEMA:
        raise SummaryUnreadable(f"not a night summary (schema {SUMMARY_SCHEMA})")
    counts, controls = doc.get("counts"), doc.get("controls")
    if not isinstance(counts, dict) or not all(
            isinstance(k, str) and type(v) is int and v >= 0 for k, v in counts.items()):
        raise SummaryUnreadable("counts is not a mapping of status to a count")
    if not isinstance(controls, dict):
        raise SummaryUnreadable("controls is not a mapping")
    regressions = doc.get("regressions", [])
    if not isinstance(regressions, list):
        raise SummaryUnreadable("regressions is not a list")
    runs = doc.get("runs")
    if not isinstance(runs, list) or len(runs) > MAX_RUNS:
        raise SummaryUnreadable(f"runs is not a list of at most {MAX_RUNS} entries")
    left = doc.get("not_executed", [])  # absent from a summary an older harness wrote
    if not isinstance(left, list) or len(left) > MAX_RUNS:
        raise SummaryUnreadable(f"not_executed is not a list of at most {MAX_RUNS} entries")
    return Summary(_text(doc, "headline"), _text(doc, "attempts"), controls, counts,
                   regressions, [_run(r) for r in runs], hashlib.sha256(raw).hexdigest(),
                   [_left(e) for e in left])


def _text(doc: Mapping[str, Any], key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or len(value) > TEXT_LIMIT:
        raise SummaryUnreadable(f"{key} is not a line of text")
    return value


def _fields(entry: Any, of: str, whose: str, texts: tuple[str, ...], ints: tuple[str, ...],
            optional: bool) -> dict[str, Any]:
    """The `texts` of one entry of `of`, each a line of text (or absent, when `optional`),
    and its `ints`, each an integer or None."""
    if not isinstance(entry, dict):
        raise SummaryUnreadable(f"an entry of {of} is not a mapping")
    out: dict[str, Any] = {}
    for key in texts:
        value = entry.get(key)
        if (value is not None or not optional) and (
                not isinstance(value, str) or len(value) > TEXT_LIMIT):
            raise SummaryUnreadable(f"{whose} {key} is not a line of text")
        out[key] = value
    for key in ints:
        value = entry.get(key)
        out[key] = value if type(value) is int else None
    return out


def _run(entry: Any) -> dict:
    """One run of the night, as a receiver needs it to name it; no paths, no reasons."""
    return _fields(entry, "runs", "a run's", ("control", "run_id", "status", "superseded_by"),
                   ("attempt",), optional=True)


def _left(entry: Any) -> dict:
    """One slot the night left unrun: its control, slot, label and why."""
    return _fields(entry, "not_executed", "a not-executed slot's", ("control", "label", "why"),
                   ("plan_index", "repeat_index"), optional=False)


def read_summary(night_dir: Path) -> Summary:
    """The night's summary.json, read bounded and strictly (see the module)."""
    path = Path(night_dir) / SUMMARY_JSON
    try:
        raw = summary_bytes(night_dir)
    except InputError as e:
        raise SummaryUnreadable(e.message) from None
    try:
        return parse_summary(raw)
    except SummaryUnreadable as e:
        raise SummaryUnreadable(f"{path}: {e.message}") from None


def build_payload(summary: Summary, *, campaign: str, night: str, ended: str,
                  exit_code: int, bundle: Bundled) -> dict:
    """Pure: the document a hook receives (schema harness.night-hook/v1): the summary's
    parts, its digest as `summary_sha256`."""
    parts = asdict(summary)
    digest = parts.pop("sha256")
    return {"schema": SCHEMA, "campaign": campaign, "night": night, "ended": ended,
            "exit_code": exit_code, **parts, "bundle": bundle.record(), "summary_sha256": digest}


def payload_bytes(payload: Mapping[str, Any]) -> bytes:
    """The one encoding sent to the command and the webhook: sorted keys, UTF-8."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"

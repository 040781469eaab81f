"""gates.json, the gate record: its schema, its one strict reader and its digest.

`passed` is true only when every gate passed and nothing was refused, so the verdict is
complete before the folder is sealed. v1 records say nothing of their tree, so no approval
rests on one. `digest` is the hash of the SHA256SUMS file: it names the sealed bytes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from harness.base.catalogue import GATES_NOT_INTACT
from harness.base.errors import InvalidInput, Refused
from harness.base.readfile import InputError, read_bounded
from harness.instrument.harness_observer.encode import depth
from harness.instrument.harness_observer.encode import loads as strict_loads
from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import MANIFEST_LIMIT, verify_folder

GATE_RECORD = "gates.json"
SCHEMA = "harness.gates/v2"
SCHEMA_V1 = "harness.gates/v1"
GATES_DIR = "gates"  # under --runs-dir
RECORD_LIMIT = 4 * 1024 * 1024
MAX_DEPTH = 8  # gates.json is 4 levels deep
_SEAL = re.compile(r"sha256:[0-9a-f]{64}")

# key -> accepted types, for each object of the record
_TOP = {"schema": str, "campaign": dict, "source_seal": str, "git": dict, "times": dict,
        "gates": list, "passed": bool}
_TOP_V2 = {**_TOP, "refusals": list}
_GIT_V2 = {"commit": (str, type(None)), "clean": bool, "problems": list, "problems_total": int}
_REFUSAL = {"rule": str, "detail": str}
_OPT_STR = (str, type(None))
_HARNESS = {"distribution": str, "version": str, "mode": str, "location": str,
            "record_sha256": _OPT_STR, "commit": _OPT_STR, "dirty": (bool, type(None))}
_CAMPAIGN = {"name": str, "file": str}
_TIMES = {"started": str, "ended": str}
_NUM = (int, float)
_GATE = {"name": str, "argv": list, "exit_code": (int, type(None)), "passed": bool,
         "duration_s": _NUM, "counts": (dict, type(None)), "kill_score": (*_NUM, type(None)),
         "min_kill_score": (*_NUM, type(None)), "why": (str, type(None))}


def _fields(obj: dict[str, Any], shape: dict[str, Any], where: str) -> list[str]:
    """Pure: why `obj` is not exactly `shape` (every key present, each of its type)."""
    out = [f"{where}: unknown key {json.dumps(k)}" for k in obj if k not in shape]
    for key, kind in shape.items():
        if key not in obj:
            out.append(f"{where}: {key} is missing")
        elif isinstance(obj[key], bool) and kind is not bool and bool not in (
                kind if isinstance(kind, tuple) else (kind,)):
            out.append(f"{where}: {key} is a boolean")  # bool is an int to isinstance
        elif not isinstance(obj[key], kind):
            out.append(f"{where}: {key} has the wrong type ({type(obj[key]).__name__})")
    return out


def _v2_problems(doc: dict[str, Any]) -> list[str]:
    out = _fields(doc["git"], _GIT_V2, "git")
    if not out and not all(isinstance(p, str) for p in doc["git"]["problems"]):
        out.append("git: problems holds a non-string")
    for i, refusal in enumerate(doc["refusals"]):
        out += (_fields(refusal, _REFUSAL, f"refusals[{i}]") if isinstance(refusal, dict)
                else [f"refusals[{i}]: not an object"])
    return out


def problems(doc: dict[str, Any]) -> list[str]:
    """Pure: why a parsed gates.json is not a v2 (or v1) gate record ([] when it is one)."""
    v1 = doc.get("schema") == SCHEMA_V1
    top = _TOP if v1 else {**_TOP_V2, **({"harness": dict} if "harness" in doc else {})}
    out = _fields(doc, top, "gates.json")
    if not out and isinstance(doc.get("harness"), dict):
        out += _fields(doc["harness"], _HARNESS, "harness")
    if out:
        return out
    if doc["schema"] not in (SCHEMA, SCHEMA_V1):
        out.append(f"gates.json: schema is not {SCHEMA}")
    if not v1:
        out += _v2_problems(doc)
    if not _SEAL.fullmatch(doc["source_seal"]):
        out.append("gates.json: source_seal is not sha256:<64 lowercase hex>")
    out += _fields(doc["campaign"], _CAMPAIGN, "campaign")
    out += _fields(doc["times"], _TIMES, "times")
    for i, gate in enumerate(doc["gates"]):
        if not isinstance(gate, dict):
            out.append(f"gates[{i}]: not an object")
            continue
        out += _fields(gate, _GATE, f"gates[{i}]")
        if isinstance(gate.get("argv"), list) and not all(isinstance(a, str)
                                                           for a in gate["argv"]):
            out.append(f"gates[{i}]: argv holds a non-string")
    if not out and doc["passed"] != verdict(doc["gates"], doc.get("refusals", [])):
        out.append("gates.json: passed does not agree with the gates and refusals")
    return out


def verdict(gates: list[dict[str, Any]], refusals: list[dict[str, Any]]) -> bool:
    """Pure: a record passed when at least one gate ran, all passed, and `harness gates`
    refused nothing: the one rule the writer and the reader apply."""
    return bool(gates) and all(g["passed"] for g in gates) and not refusals


def parse(data: bytes, where: str) -> dict[str, Any]:
    """Strict JSON (no NaN, no duplicate key, not too deep) of the v2 or v1 shape; InvalidInput."""
    try:
        doc = strict_loads(data.decode("utf-8"))
    except ValueError as e:  # not UTF-8, or encode.DecodeError (its message has the place)
        raise InvalidInput(f"{where}: not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: not a gate record (a JSON {type(doc).__name__})")
    if depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise InvalidInput(f"{where}: not a gate record (nested deeper than {MAX_DEPTH})")
    bad = problems(doc)
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise InvalidInput(f"{where}: not a gate record: " + "; ".join(bad[:5]) + more,
                           faults=bad)
    return doc


def load(folder: Path) -> dict[str, Any]:
    """The gate record of a sealed folder: Refused (GATES-NOT-INTACT) when the folder fails
    verification, InvalidInput (exit 2) when gates.json is not a gate record."""
    folder = Path(folder)
    found = verify_folder(folder)
    if found:
        shown = "; ".join(str(p) for p in found[:10])
        more = f"; and {len(found) - 10} more" if len(found) > 10 else ""
        raise Refused(f"{folder} fails verification ({len(found)} problem(s): {shown}{more})",
                      rule=GATES_NOT_INTACT)
    try:
        data = read_bounded(folder / GATE_RECORD, RECORD_LIMIT, "gate record")
    except InputError as e:
        raise InvalidInput(f"{folder}: no readable {GATE_RECORD} ({e.message})") from None
    return parse(data, str(folder / GATE_RECORD))


def digest(folder: Path) -> str:
    """"sha256:" + the SHA256 of the folder's SHA256SUMS bytes (bounded, a regular file,
    never through a symlink); Refused (GATES-NOT-INTACT) when it cannot be read."""
    try:
        data = read_bounded(Path(folder) / SUMS, MANIFEST_LIMIT, "manifest")
    except InputError as e:
        raise Refused(f"{folder}: the gate record is not sealed ({e.message})",
                      rule=GATES_NOT_INTACT) from None
    return "sha256:" + hashlib.sha256(data).hexdigest()

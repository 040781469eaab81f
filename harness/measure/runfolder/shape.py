"""What a run record must be: the strict shape every reader of run.json applies.

A record may be damaged or forged after sealing; one that parses as JSON but not as a run
record is bad input (exit 2). Unknown keys are allowed (a newer schema may add some);
every key that is there has its type."""

from __future__ import annotations

from typing import Any

from harness.base.names import RunId
from harness.base.states import STATUSES

_OPT = type(None)

# key -> accepted types; campaign and control are None only where recovery sealed a run cut
# off before its owner file named them
_REQUIRED = {"schema": str, "run_id": str, "status": str, "campaign": (dict, _OPT),
             "control": (dict, _OPT)}
_OPTIONAL = {"attempt": (int, _OPT), "image": dict, "seal": (str, _OPT),
             "model_hashes": dict, "reasons": list, "rules": list, "times": dict,
             "lock": (dict, _OPT), "outcome": dict, "post_steps": list,
             "rerun_of": (dict, _OPT), "recovered": (dict, _OPT), "stages": (list, _OPT),
             "provenance": (dict, _OPT), "harness": (dict, _OPT), "approval": (dict, _OPT),
             "slurm": (dict, _OPT),
             "telemetry": (dict, _OPT), "kernel_log": (dict, _OPT)}
_CAMPAIGN = {"name": str, "file": (str, _OPT), "row": (str, _OPT)}
_CONTROL = {"name": str, "file": (str, _OPT), "device": (str, _OPT)}
_REASON = {"rule": str, "by": str, "detail": str}


def _kinds(kind: Any) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _typed(obj: dict[str, Any], shape: dict[str, Any], where: str, required: bool
           ) -> list[str]:
    """Pure: each key of `shape` in `obj` has its type (and is there, when `required`)."""
    out = []
    for key, kind in shape.items():
        if key not in obj:
            if required:
                out.append(f"{where}{key} is missing")
            continue
        value, kinds = obj[key], _kinds(kind)
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            out.append(f"{where}{key} has the wrong type ({type(value).__name__})")
    return out


def _items(doc: dict[str, Any]) -> list[str]:
    """Pure: the entries of the lists a record holds are of their shape."""
    out = []
    for i, reason in enumerate(doc.get("reasons") or []):
        if isinstance(reason, dict):
            out += _typed(reason, _REASON, f"reasons[{i}].", True)
        elif not isinstance(reason, str):  # a v1 record's "RULE: detail"
            out.append(f"reasons[{i}] is neither a reason object nor text")
    out += [f"rules[{i}] is not a rule id" for i, r in enumerate(doc.get("rules") or [])
            if not isinstance(r, str)]
    for key in ("post_steps", "stages"):
        for i, step in enumerate(doc.get(key) or []):
            if not isinstance(step, dict):
                out.append(f"{key}[{i}] is not an object")
            elif not (isinstance(step.get("name"), str) and step["name"]):
                out.append(f"{key}[{i}] has no name")
    return out


def problems(doc: dict[str, Any]) -> list[str]:
    """Pure: why a parsed run.json is not a run record ([] when it is one)."""
    out = _typed(doc, _REQUIRED, "", True) + _typed(doc, _OPTIONAL, "", False)
    if out:
        return out
    if not RunId.valid(doc["run_id"]):  # a folder name: no '/', no '..'
        out.append("run_id is not a run folder's name")
    if doc["status"] not in STATUSES:
        out.append(f"status {doc['status'][:40]!r} is not one of {', '.join(STATUSES)}")
    attempt = doc.get("attempt")
    if isinstance(attempt, int) and attempt < 1:
        out.append("attempt is below 1")
    for key, shape in (("campaign", _CAMPAIGN), ("control", _CONTROL)):
        if isinstance(doc[key], dict):
            out += _typed(doc[key], shape, f"{key}.", False)
            out += [] if "name" in doc[key] else [f"{key}.name is missing"]
    return out + _items(doc)

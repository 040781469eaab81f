"""The one canonical, typed encoder of observed values, its decoder, and the document reader.

Why one function: the seed's instrument encoded an IntEnum by name on the start-up path and
as a bare int on the generation path (it tested `int` before `Enum`), so the same member
looked like a change. Both phases and the trace call `encode` below; nothing else encodes.

Encoding (JSON-compatible, type-preserving):
  None/bool/str/int/float -> JSON null/bool/string/number; bool is never an int and an int
  is never a float once written (`true` vs `1`, `4` vs `4.0`).
  NaN and +-inf           -> {"$float": "nan" | "inf" | "-inf"}
  list                    -> JSON array, order kept, nothing dropped
  tuple                   -> {"$tuple": [...]}
  Enum (IntEnum included) -> {"$enum": "module.QualName", "name": ..., "value": ...}
  dict with str keys      -> object ({"$dict": {...}} when a key starts with "$")
  anything else           -> {"$repr": repr, "type": "module.QualName"}

Standard library only: this module runs inside the engine's container.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from typing import Any

from . import interface

SCHEMA = "harness.observation/v1"
PHASES = interface.PHASES


def type_name(tp: type) -> str:
    """`module.QualName` of a type: the name a reader can look the type up by."""
    return f"{tp.__module__}.{tp.__qualname__}"


INFINITIES = {math.inf: "inf", -math.inf: "-inf"}


def _float(value: float) -> Any:
    if math.isnan(value):
        return {"$float": "nan"}
    if math.isinf(value):
        return {"$float": INFINITIES[value]}
    return float.__float__(value)


def _repr(value: Any) -> str:
    """repr(), but sets in sorted order: hash randomisation differs between processes."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(repr(v) for v in value)) + "}"
    return repr(value)


def encode(value: Any) -> Any:
    """Encode one observed value canonically. Enum is tested before bool and int."""
    if value is None:
        return None
    if isinstance(value, enum.Enum):
        return {"$enum": type_name(type(value)), "name": value.name, "value": encode(value.value)}
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        body = {k: encode(v) for k, v in value.items()}
        if any(k.startswith("$") for k in body):
            return {"$dict": body}
        return body
    return {"$repr": _repr(value), "type": type_name(type(value))}


def canonical(encoded: Any) -> str:
    """One string per encoded value. `true`, `1` and `1.0` stay three different strings."""
    return json.dumps(encoded, sort_keys=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class EnumRef:
    """A decoded enum member: the reader cannot (and must not) import the engine's class."""

    type: str
    name: str
    value: Any

    @classmethod
    def of(cls, member: enum.Enum) -> EnumRef:
        return cls(type_name(type(member)), member.name, member.value)


@dataclass(frozen=True)
class ReprRef:
    """A decoded `$repr`: only the text and the type name survive."""

    type: str
    repr: str


class DecodeError(ValueError):
    """An encoded value or a document that does not follow the encoding."""


FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _check_keys(obj: dict, keys: set[str]) -> None:
    if set(obj) != keys:
        raise DecodeError(f"malformed {sorted(keys)[0]} object: keys {sorted(obj)}")


def _decode_marked(obj: dict) -> Any:
    if "$enum" in obj:
        _check_keys(obj, {"$enum", "name", "value"})
        if not isinstance(obj["$enum"], str) or not isinstance(obj["name"], str):
            raise DecodeError("$enum type and name must be strings")
        return EnumRef(obj["$enum"], obj["name"], decode(obj["value"]))
    if "$float" in obj:
        _check_keys(obj, {"$float"})
        if obj["$float"] not in FLOATS:
            raise DecodeError(f"$float must be one of {sorted(FLOATS)}")
        return FLOATS[obj["$float"]]
    if "$tuple" in obj:
        _check_keys(obj, {"$tuple"})
        if not isinstance(obj["$tuple"], list):
            raise DecodeError("$tuple must hold an array")
        return tuple(decode(v) for v in obj["$tuple"])
    if "$dict" in obj:
        _check_keys(obj, {"$dict"})
        if not isinstance(obj["$dict"], dict):
            raise DecodeError("$dict must hold an object")
        return {k: decode(v) for k, v in obj["$dict"].items()}
    if "$repr" in obj:
        _check_keys(obj, {"$repr", "type"})
        if not isinstance(obj["$repr"], str) or not isinstance(obj["type"], str):
            raise DecodeError("$repr text and type must be strings")
        return ReprRef(obj["type"], obj["$repr"])
    raise DecodeError(f"unknown marker in keys {sorted(obj)}")


def decode(encoded: Any) -> Any:
    """Inverse of `encode` (enums and reprs come back as EnumRef/ReprRef). Plain legacy
    values decode to themselves, so documents from older instruments stay readable."""
    if isinstance(encoded, list):
        return [decode(v) for v in encoded]
    if isinstance(encoded, dict):
        if any(k.startswith("$") for k in encoded):
            return _decode_marked(encoded)
        return {k: decode(v) for k, v in encoded.items()}
    if isinstance(encoded, float) and not math.isfinite(encoded):
        raise DecodeError("a bare NaN or infinity is not canonical; use {\"$float\": ...}")
    return encoded


def _no_constants(name: str) -> Any:
    raise DecodeError(f"{name} is not JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise DecodeError(f"duplicate key {key!r}")
        out[key] = value
    return out


MAX_INT_DIGITS = 4300  # Python's own int/str limit (3.11+), fixed here for every Python


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise DecodeError(f"not JSON this harness reads: an integer with "
                          f"{len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _lone_surrogate(obj: Any) -> bool:
    """Whether any string (key or value) holds a lone surrogate, e.g. from a `\\ud800`
    escape: such a value cannot be written as UTF-8, so no verdict could show it."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
    return False


def depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed document, counted without recursion, and stopping once it
    passes `limit` (so a hostile, deep document costs no more than a legal one): the one
    depth check of every reader of hostile JSON (run records, gate records, bundles). Only
    containers are visited: a report reads thousands of records through it."""
    if not isinstance(value, dict | list):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend([(c, level + 1) for c in children if isinstance(c, dict | list)])
    return deepest


def deeper_than(text: str | bytes, value: Any, limit: int) -> bool:
    """Whether the document parsed from `text` nests deeper than `limit`. Every container
    opens with a bracket of the text, so a text with at most `limit` of them (counted in C,
    strings included: an over-count only means the full walk) cannot be deeper: a run.json
    has about 20, so a report of 7,300 runs does not walk them all."""
    opens = text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else (
        text.count("[") + text.count("{"))
    return opens > limit and depth(value, limit) > limit


def loads(text: str) -> Any:
    """Strict JSON: no NaN/Infinity literals, no duplicate keys (either would hide a value),
    no integer longer than 4300 digits and no lone surrogate (either would crash a reader
    or a writer later, far from the cause)."""
    try:
        obj = json.loads(text, parse_constant=_no_constants, object_pairs_hook=_no_duplicates,
                         parse_int=_int)
    except json.JSONDecodeError as e:
        raise DecodeError(f"not JSON: {e}") from None
    except RecursionError:
        raise DecodeError("not JSON this harness reads: nested too deeply") from None
    if _lone_surrogate(obj):
        raise DecodeError("not JSON this harness reads: a string is not valid Unicode "
                          "(a lone surrogate escape such as \\ud800)")
    return obj


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _process_faults(process: Any) -> list[str]:
    if not isinstance(process, dict):
        return ["process must be an object with role, rank and pid"]
    faults = []
    if not isinstance(process.get("role"), str):
        faults.append("process.role must be a string")
    for key in ("rank", "pid"):
        if not _is_int(process.get(key)):
            faults.append(f"process.{key} must be an integer")
    return faults


def _source_faults(source: Any) -> list[str]:
    if not isinstance(source, dict):
        return ["source must be an object with seal, engine and image"]
    return [f"source.{key} must be a string or null" for key in ("seal", "engine", "image")
            if key not in source or not isinstance(source[key], (str, type(None)))]


def _field_faults(fields: Any) -> list[str]:
    if not isinstance(fields, dict):
        return ["fields must be an object of dotted names to encoded values"]
    faults = []
    for name, value in fields.items():
        try:
            decode(value)
        except DecodeError as e:
            faults.append(f"fields[{name!r}]: {e}")
    return faults


MAX_HASH = 128  # characters of vLLM's configuration hash (it gives 10 or 64)


def _engine_hash_faults(witness: Any) -> list[str]:
    """`engine_hash` is optional (documents written before it have none); when there it
    is {"value": a short printable string or null, "note": a string or null}."""
    if not isinstance(witness, dict) or set(witness) != {"value", "note"}:
        return ["engine_hash must be an object with exactly value and note"]
    value, note = witness["value"], witness["note"]
    faults = []
    if value is not None and not (isinstance(value, str) and 0 < len(value) <= MAX_HASH
                                  and value.isascii() and value.isprintable()):
        faults.append(f"engine_hash.value must be null or 1..{MAX_HASH} printable ASCII "
                      "characters")
    if not isinstance(note, (str, type(None))):
        faults.append("engine_hash.note must be a string or null")
    return faults


def observation_faults(doc: Any) -> list[str]:
    """Everything structurally wrong with an observation document (empty list: readable).

    A document without `schema` is a legacy one: it is read, and its plain values (an enum
    as a name or a bare int) are kept exactly as written for the finalizer to classify."""
    if not isinstance(doc, dict):
        return ["an observation must be a JSON object"]
    faults = []
    if "schema" in doc and doc["schema"] != SCHEMA:
        faults.append(f"schema must be {SCHEMA!r} (or absent in a legacy document)")
    if not isinstance(doc.get("phase"), str):
        faults.append("phase must be a string")
    faults += _process_faults(doc.get("process"))
    faults += _source_faults(doc.get("source"))
    if not isinstance(doc.get("complete"), bool):
        faults.append("complete must be true or false")
    faults += _field_faults(doc.get("fields"))
    if "engine_hash" in doc:
        faults += _engine_hash_faults(doc["engine_hash"])
    return faults


def read_observation(text: str) -> dict:
    """Parse and check one observation document; raise DecodeError listing every fault."""
    doc = loads(text)
    faults = observation_faults(doc)
    if faults:
        raise DecodeError("; ".join(faults))
    return doc

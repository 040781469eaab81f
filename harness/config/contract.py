"""What an identity contract is: the dotted fields Gate 0 compares, as a list or an
object {"fields": [...]}. Pure, and part of the config, so `harness check` (a campaign's
`contract:`, a gate0 post-step's `options.contract`) and `harness finalize --contract`
judge a contract by the same rule without loading the finalizer.
"""

from __future__ import annotations

from typing import Any

Where = tuple[str | int, ...]

# The kinds of difference Gate 0 classifies (harness.finalize.compare), named here so that a
# config (an image gate's expected differences) can be checked without the finalizer.
VALUE_CHANGED = "value-changed"
ENCODING_MISMATCH = "encoding-mismatch"
MISSING_IN_STARTUP = "missing-in-startup"
MISSING_IN_GENERATION = "missing-in-generation"
KINDS = (VALUE_CHANGED, ENCODING_MISMATCH, MISSING_IN_STARTUP, MISSING_IN_GENERATION)


class ContractError(ValueError):
    """A contract that cannot be used; `faults` says every reason."""

    def __init__(self, faults: list[str]) -> None:
        super().__init__("; ".join(faults))
        self.faults = faults


def contract_faults(obj: Any) -> list[tuple[Where, str]]:
    """Every reason `obj` is not a contract, each with the path it is about. Pure."""
    base: Where = ()
    if isinstance(obj, dict):
        if set(obj) != {"fields"}:
            return [((), "a contract object has exactly one key, 'fields'")]
        obj, base = obj["fields"], ("fields",)
    if not isinstance(obj, list) or not obj:
        return [(base, "a contract is a non-empty list of dotted field names")]
    faults: list[tuple[Where, str]] = [
        ((*base, i), f"entry {i} is not a non-empty string: {v!r}"[:200])
        for i, v in enumerate(obj) if not isinstance(v, str) or not v.strip()]
    seen: set[str] = set()
    for i, v in enumerate(obj):
        if isinstance(v, str):
            if v in seen:
                faults.append(((*base, i), f"field {v!r} is listed twice"))
            seen.add(v)
    return faults


def fields_of(obj: Any) -> list[str]:
    """The field names of a valid contract, in order (list or {"fields": [...]})."""
    return list(obj["fields"] if isinstance(obj, dict) else obj)


def parse_contract(obj: Any) -> list[str]:
    """Validate a loaded contract; order is kept, duplicates and empties are refused."""
    faults = contract_faults(obj)
    if faults:
        raise ContractError([message for _, message in faults])
    return fields_of(obj)

"""Identity contracts: the dotted fields Gate 0 compares. A contract file is YAML or JSON,
either a list of field names or an object {"fields": [...]}.

A contract file is input like a campaign, so it is read and parsed only by the bounded,
safe loader (`harness.config.yamlsafe`): a FIFO, an alias bomb, a deep list or a 5000-digit
number is a fault at FILE:LINE:COL, never a hang or a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config.yamlsafe import Document, Fault, YamlFaults, load, loads

Where = tuple[str | int, ...]


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


def _fields(obj: Any) -> list[str]:
    return list(obj["fields"] if isinstance(obj, dict) else obj)


def parse_contract(obj: Any) -> list[str]:
    """Validate a loaded contract; order is kept, duplicates and empties are refused."""
    faults = contract_faults(obj)
    if faults:
        raise ContractError([message for _, message in faults])
    return _fields(obj)


def _from_document(doc: Document) -> list[str]:
    faults = contract_faults(doc.data)
    if faults:
        raise ContractError([str(doc.fault(where, message)) for where, message in faults])
    return _fields(doc.data)


def _loader_faults(faults: list[Fault]) -> ContractError:
    return ContractError([str(Fault(f.file, f.line, f.col, f.message.replace(
        "YAML syntax:", "not YAML or JSON:", 1))) for f in faults])


def load_contract_text(text: str, file: str = "<contract>") -> list[str]:
    """YAML (JSON is YAML) text to a contract, through the safe loader."""
    try:
        return _from_document(loads(text, file))
    except YamlFaults as e:
        raise _loader_faults(e.faults) from None


def load_contract(path: Path | str) -> list[str]:
    """A contract file to a contract: bounded read, safe parse, faults as FILE:LINE:COL."""
    try:
        return _from_document(load(path, "contract"))
    except YamlFaults as e:
        raise _loader_faults(e.faults) from None

"""Identity contracts: the dotted fields Gate 0 compares. A contract file is YAML or JSON,
either a list of field names or an object {"fields": [...]}."""

from __future__ import annotations

from typing import Any

import yaml


class ContractError(ValueError):
    """A contract that cannot be used; `faults` says every reason."""

    def __init__(self, faults: list[str]) -> None:
        super().__init__("; ".join(faults))
        self.faults = faults


def parse_contract(obj: Any) -> list[str]:
    """Validate a loaded contract; order is kept, duplicates and empties are refused."""
    if isinstance(obj, dict):
        if set(obj) != {"fields"}:
            raise ContractError(["a contract object has exactly one key, 'fields'"])
        obj = obj["fields"]
    if not isinstance(obj, list) or not obj:
        raise ContractError(["a contract is a non-empty list of dotted field names"])
    faults = [f"entry {i} is not a non-empty string: {v!r}" for i, v in enumerate(obj)
              if not isinstance(v, str) or not v.strip()]
    seen = set()
    for v in obj:
        if isinstance(v, str):
            if v in seen:
                faults.append(f"field {v!r} is listed twice")
            seen.add(v)
    if faults:
        raise ContractError(faults)
    return list(obj)


def load_contract_text(text: str) -> list[str]:
    """YAML (JSON is YAML) text to a contract."""
    try:
        obj = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ContractError([f"not YAML or JSON: {e}"]) from None
    return parse_contract(obj)

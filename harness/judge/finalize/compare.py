"""Field comparison and classification of each difference. Pure functions."""

from __future__ import annotations

from typing import Any

from harness.config.fieldlist import (
    ENCODING_MISMATCH,
    MISSING_IN_GENERATION,
    MISSING_IN_STARTUP,
    VALUE_CHANGED,
)
from harness.instrument.harness_observer.encode import canonical
from harness.judge.finalize.pins import member_of

__all__ = ["ENCODING_MISMATCH", "MISSING_IN_GENERATION", "MISSING_IN_STARTUP", "VALUE_CHANGED",
           "classify", "compare_fields"]


MISSING: Any = object()  # a field absent from a document; None is a value


def classify(field: str, startup: Any, generation: Any, pins: dict[str, Any]) -> str | None:
    """The kind of difference between two raw observed values, or None when they agree.

    Agreement is canonical-text equality: `true` vs `1` and `4` vs `4.0` differ."""
    if startup is MISSING:
        return None if generation is MISSING else MISSING_IN_STARTUP
    if generation is MISSING:
        return MISSING_IN_GENERATION
    if canonical(startup) == canonical(generation):
        return None
    a = member_of(field, startup, pins)
    if a is not None and a == member_of(field, generation, pins):
        return ENCODING_MISMATCH
    return VALUE_CHANGED


def compare_fields(startup: dict[str, Any], generation: dict[str, Any],
                   contract: list[str] | None, pins: dict[str, Any]) -> dict[str, Any]:
    """Compare the contract's fields (or the union without one), raw values kept as seen.

    Returns {"compared": N, "names": the fields compared, "differences": [...],
    "contract_missing": [...]}."""
    names = list(contract) if contract is not None else sorted(set(startup) | set(generation))
    differences = []
    contract_missing = []
    for name in names:
        s = startup.get(name, MISSING)
        g = generation.get(name, MISSING)
        if contract is not None and (s is MISSING or g is MISSING):
            contract_missing.append(name)
        kind = classify(name, s, g, pins)
        if kind is not None:
            differences.append({"field": name, "kind": kind,
                                "startup": None if s is MISSING else s,
                                "generation": None if g is MISSING else g})
    return {"compared": len(names), "names": names, "differences": differences,
            "contract_missing": contract_missing}

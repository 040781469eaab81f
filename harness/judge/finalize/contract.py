"""Identity contracts: the dotted fields Gate 0 compares. A contract file is YAML or JSON,
either a list of field names or an object {"fields": [...]}.

A contract file is input like a campaign, so it is read and parsed only by the bounded,
safe loader (`harness.config.yamlsafe`): a FIFO, an alias bomb, a deep list or a 5000-digit
number is a fault at FILE:LINE:COL, never a hang or a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config.fieldlist import ALL, ContractError, contract_faults, fields_of, resolve
from harness.config.fieldlist import parse_contract as parse_contract  # re-exported
from harness.config.yamlsafe import Document, Fault, YamlFaults, load, loads


def _from_document(doc: Document) -> list[str]:
    faults = contract_faults(doc.data)
    if faults:
        raise ContractError([str(doc.fault(where, message)) for where, message in faults])
    return fields_of(doc.data)


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


def rejudge_contract(given: list[str] | str | None, previous: Any) -> list[str] | None:
    """The fields a re-judgement compares (None: every field). Pure.

    `given` (a list, or `all`) wins. Otherwise the run's own gate0 verdict decides: its
    recorded list, or every field when it recorded none (it was judged before Gate 0 had a
    default, or under `contract: all`), so a refinalize reproduces the judgement it
    revisits. A run without a readable gate0 verdict gets today's default."""
    if given is not None:
        return resolve(given)
    if isinstance(previous, dict) and "contract" in previous:
        recorded = previous["contract"]
        if recorded is None:
            return resolve(ALL)
        if isinstance(recorded, list) and not contract_faults(recorded):
            return fields_of(recorded)
    return resolve(None)

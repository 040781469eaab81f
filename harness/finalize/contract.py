"""Identity contracts: the dotted fields Gate 0 compares. A contract file is YAML or JSON,
either a list of field names or an object {"fields": [...]}.

A contract file is input like a campaign, so it is read and parsed only by the bounded,
safe loader (`harness.config.yamlsafe`): a FIFO, an alias bomb, a deep list or a 5000-digit
number is a fault at FILE:LINE:COL, never a hang or a crash.
"""

from __future__ import annotations

from pathlib import Path

from harness.config.contract import ContractError, contract_faults, fields_of
from harness.config.contract import parse_contract as parse_contract  # re-exported
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

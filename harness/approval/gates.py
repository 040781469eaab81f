"""The gate record an approval rests on: intact (it verifies), passed, for the same seal.

The record is read by its one reader (`harness.gates.record.load`, which verifies the
folder first) and named by its digest (the sha256 of its SHA256SUMS bytes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.approval.record import Finding
from harness.catalogue import (
    APPROVAL_GATES_FAILED,
    APPROVAL_GATES_MISSING,
    APPROVAL_GATES_NOT_INTACT,
    APPROVAL_GATES_OTHER_SEAL,
)
from harness.errors import HarnessError
from harness.gates import record as gate_record
from harness.tree import printable


def read(folder: Path, campaign: str, seal: str, required: list[str]
         ) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The gate record's summary for an approval, and each reason it cannot carry one.

    `required`: the campaign's gate names. A record of some of them (`gates --only`) passed
    only what it ran, so it cannot carry an approval."""
    where = printable(str(folder))[:500]
    try:  # the path comes from an approval file: it may be too long, or hold a NUL
        is_dir = folder.is_dir()
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or str(e)
        return None, [(APPROVAL_GATES_MISSING, f"{where}: not a usable path ({why})")]
    if not is_dir:
        return None, [(APPROVAL_GATES_MISSING, f"{where} is not a folder")]
    try:
        doc = gate_record.load(folder)
        digest = gate_record.digest(folder)
    except HarnessError as e:  # Refused (not intact) or InvalidInput (not a gate record)
        return None, [(APPROVAL_GATES_NOT_INTACT, printable(e.message)[:1000])]
    except OSError as e:
        return None, [(APPROVAL_GATES_NOT_INTACT, f"{where}: {printable(str(e))[:500]}")]
    found: list[Finding] = []
    if not doc["passed"]:
        failed = ", ".join(printable(g["name"]) for g in doc["gates"] if not g["passed"])
        found.append((APPROVAL_GATES_FAILED, f"{where}: failed gates: {failed or 'none ran'}"))
    missing = sorted(set(required) - {g["name"] for g in doc["gates"]})
    if missing:
        found.append((APPROVAL_GATES_FAILED, f"{where}: the campaign's gates "
                      f"{', '.join(printable(n) for n in missing)} did not run in it"))
    name = doc["campaign"]["name"]
    if doc["source_seal"] != seal or name != campaign:
        found.append((APPROVAL_GATES_OTHER_SEAL, f"{where} is for campaign {printable(name)} "
                      f"seal {doc['source_seal']}, not {campaign} {seal}"))
    summary = {"digest": digest, "campaign": name, "source_seal": doc["source_seal"],
               "passed": doc["passed"]}
    return summary, found


def recheck(folder: Path, want_digest: str, campaign: str, seal: str,
            required: list[str]) -> list[Finding]:
    """At run time: the named record is still there, intact, the same, passed, same seal."""
    summary, found = read(folder, campaign, seal, required)
    if summary is not None and summary["digest"] != want_digest:
        found.append((APPROVAL_GATES_NOT_INTACT, f"{printable(str(folder))}: SHA256SUMS is "
                      f"{summary['digest']}, the approval names {printable(want_digest)}"))
    return found

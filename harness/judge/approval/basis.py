"""The gate record an approval rests on: intact, passed, for the same seal, from the commit.

One pure rule, `judge_record`, serves approve, the run-time check and `bundle verify`, so
no path accepts a record another refuses. An approval names its record by folder name,
found only in the runs dir's gates folder: an operator's absolute path is true on one
host only, and an older path is read by its last part, so `../..` never leads out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from harness.base.catalogue import (
    APPROVAL_GATES_DIRTY,
    APPROVAL_GATES_FAILED,
    APPROVAL_GATES_MISSING,
    APPROVAL_GATES_NOT_INTACT,
    APPROVAL_GATES_OTHER_COMMIT,
    APPROVAL_GATES_OTHER_SEAL,
)
from harness.base.errors import HarnessError
from harness.base.names import RUN_ID_MAX, is_name
from harness.base.tree import printable
from harness.judge.approval.document import Finding
from harness.judge.gaterecord import gatesjson as gate_record


def record_name(named: object) -> str | None:
    """Pure: the gate record's folder name an approval's `gates.record` gives: the name
    itself, or the last part of an older approval's path (absolute or relative); None when
    that is not a name of the one alphabet (`names.is_name`): no `..`, no separator."""
    if not isinstance(named, str) or not named or "\\" in named or "\0" in named:
        return None
    name = PurePosixPath(named).name
    return name if is_name(name, RUN_ID_MAX) else None


def locate(named: object, runs_dir: Path | None) -> tuple[Path | None, list[Finding]]:
    """The gate record folder an approval names, `<runs_dir>/gates/<name>`, or why it
    cannot be found there (APPROVAL-GATES-MISSING). Reads only whether it is a folder."""
    name = record_name(named)
    shown = printable(str(named))[:300]
    if name is None:
        return None, [(APPROVAL_GATES_MISSING, f"gate record {shown!r} is not a record name "
                       "(letters, digits, . _ -; no folder part)")]
    if runs_dir is None:
        return None, [(APPROVAL_GATES_MISSING, f"gate record {name}: no runs dir to look in")]
    folder = Path(runs_dir) / gate_record.GATES_DIR / name
    try:
        found = folder.is_dir() and not folder.is_symlink()
    except (OSError, ValueError):
        found = False
    if not found:
        where = printable(str(Path(runs_dir) / gate_record.GATES_DIR))[:500]
        return None, [(APPROVAL_GATES_MISSING, f"gate record {name} is not in {where} (an "
                       "approval names its record by name: run with the --runs-dir `harness "
                       "gates` wrote it to, or copy the record folder there)")]
    return folder, []


@dataclass(frozen=True)
class Wanted:
    """What an approval needs its gate record to be for: the campaign, its gates (a
    record of some of them, `gates --only`, passed only what it ran), the seal, and the
    commit the approval names (the reviewed one)."""

    campaign: str
    required: tuple[str, ...]
    seal: str
    commit: str | None


def _provenance(doc: dict[str, Any], commit: str | None, where: str) -> list[Finding]:
    """Pure: the record's gates ran from a checkout clean at `commit` throughout."""
    git = doc["git"]
    if doc["schema"] == gate_record.SCHEMA_V1:
        return [(APPROVAL_GATES_DIRTY, f"{where} is a {gate_record.SCHEMA_V1} record, which "
                 "does not say whether its gates ran from a clean commit: run the gates again")]
    if not git["clean"]:
        shown = "; ".join(printable(p) for p in git["problems"][:5])
        return [(APPROVAL_GATES_DIRTY, f"{where}: its gates ran from a checkout not clean at "
                 f"commit {printable(str(git['commit']))} ({git['problems_total']} "
                 f"problem(s): {shown})")]
    if git["commit"] != commit:
        return [(APPROVAL_GATES_OTHER_COMMIT, f"{where}: its gates ran at commit "
                 f"{printable(str(git['commit']))}, the approval is of commit "
                 f"{printable(str(commit))}")]
    return []


def judge_record(doc: dict[str, Any], want: Wanted, where: str) -> list[Finding]:
    """Pure: every reason a parsed gate record cannot carry an approval of `want`."""
    found: list[Finding] = []
    if not doc["passed"]:
        failed = [printable(g["name"]) for g in doc["gates"] if not g["passed"]]
        failed += [printable(r["rule"]) for r in doc.get("refusals", [])]
        found.append((APPROVAL_GATES_FAILED, f"{where}: failed: {', '.join(failed) or 'none ran'}"))
    missing = sorted(set(want.required) - {g["name"] for g in doc["gates"]})
    if missing:
        found.append((APPROVAL_GATES_FAILED, f"{where}: the campaign's gates "
                      f"{', '.join(printable(n) for n in missing)} did not run in it"))
    name = doc["campaign"]["name"]
    if doc["source_seal"] != want.seal or name != want.campaign:
        found.append((APPROVAL_GATES_OTHER_SEAL, f"{where} is for campaign {printable(name)} "
                      f"seal {doc['source_seal']}, not {want.campaign} {want.seal}"))
    return found + _provenance(doc, want.commit, where)


def read(folder: Path, want: Wanted) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The gate record's summary for an approval, and each reason it cannot carry one."""
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
    summary = {"digest": digest, "campaign": doc["campaign"]["name"],
               "source_seal": doc["source_seal"], "passed": doc["passed"]}
    return summary, judge_record(doc, want, where)


def recheck(folder: Path, want_digest: str, want: Wanted) -> list[Finding]:
    """At run time: the named record is still there, intact, the same, and still carries
    the approval (`judge_record`)."""
    summary, found = read(folder, want)
    if summary is not None and summary["digest"] != want_digest:
        found.append((APPROVAL_GATES_NOT_INTACT, f"{printable(str(folder))}: SHA256SUMS is "
                      f"{summary['digest']}, the approval names {printable(want_digest)}"))
    return found

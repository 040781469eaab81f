"""Clean a run folder before it is sealed: the one cleaner for finish and for recovery.

The workload writes `observations/` (post-steps write their own folders), so anything may
be there. A seal may only list what `sha256sum -c` and `harness verify` read alike and
what hashing can read safely, so before sealing:
- every symlink, FIFO, socket or device is unlinked, never followed or opened
  (`EVIDENCE-NOT-REGULAR`);
- every entry whose name `tree.path_problem` rejects is removed, a folder with all below
  it (`EVIDENCE-BAD-NAME`). Decision: such names are removed and listed, never sealed in
  coreutils' escaped form. Bytes that are not UTF-8, \\r, \\n, U+0085, U+2028/2029, bidi
  overrides and backslashes each render differently in some tool (Python's splitlines,
  a terminal, a viewer, coreutils' escaping), so a seal holding them is one tool's truth,
  not every reviewer's. Nothing is silently lost: the record gives each removed path in
  `tree.printable` form with its kind, size and, for a regular file, its sha256;
- every folder below `tree.MAX_DEPTH`, and every path longer than `tree.MAX_PATH_BYTES`,
  is removed with all below it (`EVIDENCE-TOO-DEEP`);
- every file in the workload's `observations/` larger than `manifest.MAX_WORKLOAD_FILE` is
  removed unhashed, with its size and allocated blocks recorded (`EVIDENCE-TOO-BIG`): a
  sparse 15 TiB file costs the workload one `truncate` and would hold sealing for hours;
- a run folder holding more than `manifest.MAX_ENTRIES` entries has the workload's
  `observations/` removed whole, unhashed (`EVIDENCE-TOO-MANY`): sealing, `verify` and
  every later reader stay bounded (100,000 files take ~20 s through all of them);
- then folders left holding no file are pruned (a manifest cannot list a folder, and
  `verify` names unlisted folders); that alone refuses nothing.
What was removed is written to `non-regular-removed.json` whenever anything that refuses
was removed, and the reasons refuse the run. Pruned folders that the workload left empty
are listed there too; a folder emptied only by these removals is implied by them.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.base.atomic import write_json
from harness.base.catalogue import (
    EVIDENCE_BAD_NAME,
    EVIDENCE_NOT_REGULAR,
    EVIDENCE_TOO_BIG,
    EVIDENCE_TOO_DEEP,
    EVIDENCE_TOO_MANY,
)
from harness.base.hashing import sha256_beneath
from harness.base.readfile import InputError, read_bounded
from harness.base.reason import Reason
from harness.base.tree import (
    Entry,
    TooMany,
    open_dir_beneath,
    printable,
    remove_beneath,
    too_long,
    walk,
)
from harness.measure.runfolder import layout
from harness.measure.runfolder.manifest import (
    MAX_ENTRIES,
    MAX_WORKLOAD_FILE,
    WORKLOAD_DIR,
    empty_folders,
    too_big,
)

RECORD = layout.REMOVED
RULES = {"not-regular": EVIDENCE_NOT_REGULAR, "bad-name": EVIDENCE_BAD_NAME,
         "too-deep": EVIDENCE_TOO_DEEP, "too-big": EVIDENCE_TOO_BIG,
         "too-many": EVIDENCE_TOO_MANY}
MAX_REASONS = 20  # per rule; the record lists every entry


@dataclass(frozen=True)
class Removal:
    """One entry to remove. `top`: removed itself, not as part of a removed folder."""

    entry: Entry
    why: str  # not-regular | bad-name | too-deep | empty-folder
    top: bool

    def record(self) -> dict:
        e = self.entry
        doc = {"path": printable(e.rel), "kind": e.kind, "size": e.size,
               "mode": oct(e.mode), "why": self.why,
               "target": None if e.target is None else printable(e.target)}
        if e.name_problem:
            doc["name_problem"] = e.name_problem
        return doc


def plan(entries: list[Entry]) -> list[Removal]:
    """Pure: which entries of a walked tree must go before sealing, and why."""
    out: list[Removal] = []
    gone: set[str] = set()  # folders removed with everything below them
    for e in entries:
        parts = e.rel.split("/")
        inside = any("/".join(parts[:i]) in gone for i in range(1, len(parts)))
        if e.name_problem:
            why = "bad-name"
        elif not (e.is_file or e.is_dir):
            why = "not-regular"
        elif e.too_deep or too_long(e.rel):
            why = "too-deep"
        elif too_big(e):
            why = "too-big"
        else:
            continue
        out.append(Removal(e, why, top=not inside))
        if e.is_dir:
            gone.add(e.rel)
    return out


def reasons(removals: list[Removal]) -> list[Reason]:
    """Pure: one reason per removed entry (at most MAX_REASONS per rule, then a count)."""
    out: list[Reason] = []
    for why, rule in RULES.items():
        tops = [r for r in removals if r.why == why and r.top]
        for r in tops[:MAX_REASONS]:
            out.append(Reason(rule, _describe(r, removals)))
        if len(tops) > MAX_REASONS:
            out.append(Reason(rule, f"and {len(tops) - MAX_REASONS} more; every one is "
                                    f"listed in {RECORD}"))
    return out


def _describe(r: Removal, removals: list[Removal]) -> str:
    e = r.entry
    path = printable(e.rel)
    if r.why == "bad-name":
        below = sum(1 for o in removals if o.entry.rel.startswith(e.rel + "/"))
        more = f", with {below} entr{'y' if below == 1 else 'ies'} below it" if below else ""
        return f"{path}: {e.name_problem}; removed ({e.kind}{more}), listed in {RECORD}"
    if r.why == "too-big":
        return (f"{path}: {e.size} bytes written by the workload, over the "
                f"{MAX_WORKLOAD_FILE} byte limit; removed unhashed")
    if r.why == "too-deep":
        shown = path if len(path) <= 200 else path[:200] + "..."
        below = " with all below it" if e.is_dir else ""
        return f"{shown}: nested too deep or too long a path to seal; removed{below}"
    to = f" -> {printable(e.target)}" if e.target is not None else ""
    return f"{path} was not a regular file ({e.kind}{to}); removed"


def _hash(run_dir: Path, rel: str) -> tuple[str | None, str | None]:
    try:
        return sha256_beneath(run_dir, rel), None
    except OSError as e:
        return None, e.strerror or str(e)


def _rmdir(run_dir: Path, rel: str) -> None:
    parent, _, name = rel.rpartition("/")
    fd = open_dir_beneath(run_dir, parent)
    try:
        os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


def earlier_reasons(run_dir: Path) -> list[Reason]:
    """Reasons from a record an earlier, cut-off pass wrote (its entries are gone now)."""
    out: list[Reason] = []
    for name in sorted(os.listdir(run_dir)):
        if not (name == RECORD or (name.startswith(layout.REMOVED_PREFIX)
                                   and name.endswith(".json"))):
            continue
        try:
            doc = json.loads(read_bounded(run_dir / name, 64 * 1024 * 1024, "record"))
        except (InputError, ValueError, RecursionError):
            continue
        for item in doc if isinstance(doc, list) else []:
            why = item.get("why", "not-regular") if isinstance(item, dict) else None
            if why in RULES:
                out.append(Reason(RULES[why], f"{item.get('path')}: removed by an earlier "
                                              f"pass, listed in {name}"))
    return out


def _record_name(run_dir: Path) -> str:
    for n in range(1, 1000):
        name = layout.removed_record(n)
        if not os.path.lexists(run_dir / name):
            return name
    raise FileExistsError(f"{run_dir}: too many removal records")


def bare_folders(entries: list[Entry]) -> set[str]:
    """Pure: folders with nothing but folders below them, as the workload left them (a
    folder emptied by our own removals is implied by those and not listed again)."""
    holding: set[str] = set()
    for e in entries:
        if not e.is_dir:
            parts = e.rel.split("/")[:-1]
            holding.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {e.rel for e in entries if e.is_dir and e.rel not in holding}


def _too_many(run_dir: Path) -> list[dict]:
    """The workload's folder holds more entries than any run may seal: remove it whole
    (iteratively, following nothing) and say so; the count is all that is kept."""
    with contextlib.suppress(FileNotFoundError):
        remove_beneath(run_dir, WORKLOAD_DIR)
    return [{"path": WORKLOAD_DIR, "kind": "dir", "why": "too-many",
             "detail": f"more than {MAX_ENTRIES} entries in the run folder; the "
                       f"workload's {WORKLOAD_DIR}/ was removed whole, unhashed"}]


def clean(run_dir: Path) -> list[Reason]:
    """Remove and record what no seal may hold; return the reasons that refuse the run."""
    prior = earlier_reasons(run_dir)
    try:
        before = walk(run_dir, MAX_ENTRIES)
        flood: list[dict] = []
    except TooMany:
        flood = _too_many(run_dir)
        before = walk(run_dir, MAX_ENTRIES)  # the harness's own files: a few dozen
    bare = bare_folders(before)
    removals = plan(before)
    records = list(flood)
    for r in removals:
        doc = r.record()
        if r.entry.is_file and r.why != "too-big":  # keep what it held, as a digest
            doc["sha256"], err = _hash(run_dir, r.entry.rel)
            if err:
                doc["error"] = err
        records.append(doc)
    for r in removals:
        if r.top:
            with contextlib.suppress(FileNotFoundError):  # gone already: nothing to remove
                remove_beneath(run_dir, r.entry.rel)
    after = walk(run_dir)
    by_rel = {e.rel: e for e in after}
    for rel in reversed(empty_folders(after)):  # children before parents
        _rmdir(run_dir, rel)
        if rel in bare:
            records.append(Removal(by_rel[rel], "empty-folder", top=True).record())
    if removals or flood:
        write_json(run_dir / _record_name(run_dir), records, exclusive=True)
    flooded = [Reason(EVIDENCE_TOO_MANY, flood[0]["detail"])] if flood else []
    return prior + flooded + reasons(removals)

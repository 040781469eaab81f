"""Clean a run folder before it is sealed: the one cleaner for finish and for recovery.

The workload writes `observations/`, so anything may be there, and a seal may only list
what `sha256sum -c` and `harness verify` read alike and hashing reads safely. Removed and
listed (in `non-regular-removed.json`), each refusing the run: non-regular entries
(EVIDENCE-NOT-REGULAR, never followed); names `tree.path_problem` rejects
(EVIDENCE-BAD-NAME: they render differently in some tool, so are never sealed escaped);
paths too deep or long (EVIDENCE-TOO-DEEP); workload files over `MAX_WORKLOAD_FILE`
(EVIDENCE-TOO-BIG: a sparse 15 TiB file would hold sealing for hours); and `observations/`
whole past `MAX_ENTRIES` entries (EVIDENCE-TOO-MANY). Then empty folders are pruned (a
manifest cannot list one), which alone refuses nothing."""

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
                                    f"listed in {layout.REMOVED}"))
    return out


def _describe(r: Removal, removals: list[Removal]) -> str:
    e = r.entry
    path = printable(e.rel)
    if r.why == "bad-name":
        below = sum(1 for o in removals if o.entry.rel.startswith(e.rel + "/"))
        more = f", with {below} entr{'y' if below == 1 else 'ies'} below it" if below else ""
        return f"{path}: {e.name_problem}; removed ({e.kind}{more}), listed in {layout.REMOVED}"
    if r.why == "too-big":
        return (f"{path}: {e.size} bytes written by the workload, over the "
                f"{MAX_WORKLOAD_FILE} byte limit; removed unhashed")
    if r.why == "too-deep":
        shown = path if len(path) <= 200 else path[:200] + "..."
        below = " with all below it" if e.is_dir else ""
        return f"{shown}: nested too deep or too long a path to seal; removed{below}"
    to = f" -> {printable(e.target)}" if e.target is not None else ""
    return f"{path} was not a regular file ({e.kind}{to}); removed"


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
        if not (name == layout.REMOVED or (name.startswith(layout.REMOVED_PREFIX)
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
    """Pure: folders the workload left holding nothing but folders."""
    holding: set[str] = set()
    for e in entries:
        if not e.is_dir:
            parts = e.rel.split("/")[:-1]
            holding.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {e.rel for e in entries if e.is_dir and e.rel not in holding}


def _too_many(run_dir: Path) -> list[dict]:
    """Remove the workload's flooded folder whole, following nothing; keep the count."""
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
            try:
                doc["sha256"] = sha256_beneath(run_dir, r.entry.rel)
            except OSError as e:
                doc["sha256"], doc["error"] = None, e.strerror or str(e)
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

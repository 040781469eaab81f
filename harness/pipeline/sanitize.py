"""Undo, on the host, what a root workload can plant through a read-write mount.

Root in its container, a workload may `chmod 4755` what it creates in a bind mount (not
`nosuid`: any host user could then run it as root), or `mknod` a host disk's device node
(rocm). So right after the container exits, under the lock, each read-write source is
walked without following symlinks: setuid/setgid bits are cleared, device nodes unlinked,
each listed in `mounts-sanitized.json` and refusing the run; a walk cut short refuses too,
since what lies beyond was not looked at."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.base import tree
from harness.base.atomic import write_json
from harness.base.catalogue import (
    MOUNT_DEVICE_PLANTED,
    MOUNT_SANITIZE_INCOMPLETE,
    MOUNT_SETUID_PLANTED,
)
from harness.base.reason import Reason
from harness.measure.runfolder import layout

MAX_ENTRIES = 1_000_000  # per mount; a bigger tree is reported, not finished
SETID_BITS = stat.S_ISUID | stat.S_ISGID
DEVICE_KINDS = ("char-device", "block-device")
SHOWN = 5  # paths named in a reason; the evidence file lists them all


@dataclass(frozen=True)
class Repair:
    """One thing to undo: `rel` below the mount's source ("" is the source itself)."""

    rel: str
    kind: str
    mode: int  # as found
    do: str  # "clear-setid" | "unlink"

    @property
    def new_mode(self) -> int:
        """The permission bits to set: the old ones without setuid and setgid."""
        return stat.S_IMODE(self.mode) & ~SETID_BITS


def decide(entries: Iterable[tree.Entry]) -> list[Repair]:
    """Pure: what to undo among `entries` (as `tree.walk` lists them)."""
    out = []
    for e in entries:
        if e.kind in ("file", "dir") and e.mode & SETID_BITS:
            out.append(Repair(e.rel, e.kind, e.mode, "clear-setid"))
        elif e.kind in DEVICE_KINDS:
            out.append(Repair(e.rel, e.kind, e.mode, "unlink"))
    return out


def scan(root: Path, max_entries: int = MAX_ENTRIES) -> tuple[list[tree.Entry], list[str]]:
    """The source and every entry below it, and why the list is not whole."""
    try:
        st = os.lstat(root)
    except OSError as e:
        return [], [f"the source cannot be read: {e.strerror}"]
    entries = [tree.Entry("", tree.kind_of(st.st_mode), st.st_size, st.st_mode)]
    if not stat.S_ISDIR(st.st_mode):
        return entries, []
    problems: list[str] = []
    pending = [""]
    while pending:
        base = pending.pop()
        try:
            found = tree.walk(root / base if base else root,
                              max_entries=max(0, max_entries - len(entries) + 1))
        except tree.TooMany:
            problems.append(f"more than {max_entries:,} entries: the walk stopped")
            break
        except OSError as e:
            problems.append(f"{tree.printable(base) or '.'}: cannot be walked: "
                            f"{e.strerror or e}")
            continue
        for e in found:
            rel = f"{base}/{e.rel}" if base else e.rel
            entries.append(dataclasses.replace(e, rel=rel))
            if e.too_deep:
                pending.append(rel)
    return entries, problems


def apply(root: Path, repair: Repair) -> str | None:
    """Undo one thing, following no symlink; the error, or None when it was done."""
    try:
        if repair.do == "unlink":
            if not repair.rel:
                return "the source itself cannot be removed"
            tree.remove_beneath(root, repair.rel)
        else:
            tree.chmod_beneath(root, repair.rel, repair.new_mode)
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    return None


def _record(repair: Repair, error: str | None) -> dict:
    return {"path": tree.printable(repair.rel) or ".", "kind": repair.kind,
            "old_mode": f"{repair.mode & 0o7777:04o}",
            "action": "setuid/setgid cleared" if repair.do == "clear-setid" else "unlinked",
            "done": error is None, "error": error}


def _reason(rule: str, what: str, source: Path, records: list[dict], words: str) -> Reason:
    shown = ", ".join(f"{r['path']} ({r['old_mode']}, {r['kind']})" for r in records[:SHOWN])
    more = f" and {len(records) - SHOWN} more" if len(records) > SHOWN else ""
    failed = sum(not r["done"] for r in records)
    tail = f"; {failed} could not be undone" if failed else ""
    return Reason(rule, f"{what} ({source}): the workload left {len(records)} {words}: "
                        f"{shown}{more}{tail}; see {layout.MOUNTS_SANITIZED}")


def sanitize(run_dir: Path, mounts: list[tuple[str, Path]],
             max_entries: int = MAX_ENTRIES) -> list[Reason]:
    """Walk each read-write mount, undo what `decide` says; the refusals."""
    doc, reasons = [], []
    for what, source in mounts:
        entries, problems = scan(source, max_entries)
        records = [_record(a, apply(source, a)) for a in decide(entries)]
        if not records and not problems:
            continue
        doc.append({"mount": what, "source": str(source), "entries_walked": len(entries),
                    "complete": not problems, "problems": problems, "entries": records})
        setid = [r for r in records if r["kind"] in ("file", "dir")]
        devices = [r for r in records if r["kind"] in DEVICE_KINDS]
        if setid:
            reasons.append(_reason(MOUNT_SETUID_PLANTED, what, source, setid,
                                   "setuid/setgid entries (bits cleared)"))
        if devices:
            reasons.append(_reason(MOUNT_DEVICE_PLANTED, what, source, devices,
                                   "device nodes (unlinked)"))
        if problems:
            reasons.append(Reason(MOUNT_SANITIZE_INCOMPLETE, f"{what} ({source}) was not "
                                  "checked whole for setuid files and device nodes: "
                                  f"{'; '.join(problems)}"))
    if doc:
        write_json(run_dir / layout.MOUNTS_SANITIZED, {"schema": "harness.mounts-sanitized/v1",
                                        "max_entries": max_entries, "mounts": doc})
    return reasons

"""Which files go into a bundle's payload, and which folders inside it are runs.

Run and night folders are copied unchanged under `data/<folder-name>/`. Anything a
manifest cannot describe faithfully (symlinks, devices, odd names) is refused up front,
because a bundle that silently drops or rewrites evidence is worse than none.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.bundle.sums import unsafe_name_reason
from harness.errors import InvalidInput

RUN_RECORD = "run.json"
SEAL_FILE = "SHA256SUMS"


@dataclass(frozen=True)
class PayloadFile:
    """One payload file: where it goes in the bag (`arcname`, under data/) and where it is now."""

    arcname: str
    source: Path
    size: int


@dataclass(frozen=True)
class Payload:
    files: list[PayloadFile]  # sorted by arcname
    roots: list[tuple[str, Path]]  # (name under data/, source folder), in argument order


def find_run_dirs(relpaths: Iterable[str]) -> list[str]:
    """Folders holding a run.json ("" for the root), not nested in another run: a run's
    addenda are not runs."""
    candidates = {str(PurePosixPath(p).parent) for p in relpaths
                  if PurePosixPath(p).name == RUN_RECORD}
    shallow_first = sorted(("" if d == "." else d for d in candidates),
                           key=lambda d: (0 if d == "" else d.count("/") + 1, d))
    runs: list[str] = []
    for d in shallow_first:
        if not any(r == "" or d.startswith(r + "/") for r in runs):
            runs.append(d)
    return sorted(runs)


def _walk_files(root: Path, faults: list[str]) -> list[tuple[str, Path, int]]:
    """Every regular file under `root` as (relpath, path, size); anything else is a fault."""
    found: list[tuple[str, Path, int]] = []

    def fail(err: OSError) -> None:
        faults.append(f"{err.filename}: cannot read: {err.strerror}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=fail):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                faults.append(f"{path}: name is not UTF-8")
                continue
            reason = unsafe_name_reason(rel)
            if reason:
                faults.append(f"{path}: {reason}")
                continue
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                faults.append(f"{path}: is a symlink; bundles hold regular files only")
            elif name in filenames and not stat.S_ISREG(st.st_mode):
                faults.append(f"{path}: is not a regular file")
            elif name in filenames:
                if not os.access(path, os.R_OK):
                    faults.append(f"{path}: is not readable")
                else:
                    found.append((rel, path, st.st_size))
    return found


def collect_payload(folders: list[Path]) -> Payload:
    """Check the given run or night folders and list their files; InvalidInput lists every fault."""
    faults: list[str] = []
    roots: list[tuple[str, Path]] = []
    files: list[PayloadFile] = []
    resolved: list[Path] = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            faults.append(f"{folder}: not a folder (give run or night folders)")
            continue
        real = folder.resolve()
        name = real.name
        if unsafe_name_reason(name) or "/" in name:
            faults.append(f"{folder}: folder name {name!r} cannot be used in a bundle")
            continue
        for other in resolved:
            if real == other or real.is_relative_to(other) or other.is_relative_to(real):
                faults.append(f"{folder}: overlaps {other}; give each folder once")
        if any(name == n for n, _ in roots):
            faults.append(f"{folder}: another folder is also named {name!r}")
        resolved.append(real)
        entries = _walk_files(real, faults)
        if not find_run_dirs(rel for rel, _, _ in entries):
            faults.append(f"{folder}: no {RUN_RECORD} in it; not a run or night folder")
        roots.append((name, real))
        files.extend(PayloadFile(f"data/{name}/{rel}", path, size) for rel, path, size in entries)
    if faults:
        raise InvalidInput("cannot bundle these folders", faults=faults)
    files.sort(key=lambda f: f.arcname)
    return Payload(files=files, roots=roots)

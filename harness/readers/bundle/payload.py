"""Which files go into a bundle's payload, and which folders inside it are runs.

Anything a manifest cannot describe faithfully (symlinks, devices, odd names) is refused
up front: a bundle that silently drops or rewrites evidence is worse than none."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.tree import MAX_DEPTH, path_problem, printable, walk
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.runfolder.layout import RECORD
from harness.readers.bundle.bag import NIGHTS, PAYLOAD_DIR, arc_folder
from harness.readers.bundle.nightruns import left_out, night_run_folders

NIGHT_RECORD = JOURNAL_NAME  # a night folder holds its journal; its runs may live elsewhere


@dataclass(frozen=True)
class PayloadFile:
    """One payload file: where it goes in the bag and where it is now. It is opened only beneath
    its bundled folder `root`."""

    arcname: str
    root: Path
    rel: str
    size: int


@dataclass(frozen=True)
class Payload:
    files: list[PayloadFile]  # sorted by arcname
    # (folder under data/: <run-id>, or nights/<night> for a night; source), argument order
    roots: list[tuple[str, Path]]
    named: list[str]  # the names of the folders given (not those a night's journal added)


def find_run_dirs(relpaths: Iterable[str]) -> list[str]:
    """Folders holding a run.json, not nested in another run: a run's addenda are not runs."""
    found = {parent for parent, _, name in (p.rpartition("/") for p in relpaths)
             if name == RECORD}
    if "" in found:
        return [""]
    return sorted(d for d in found if not any(a in found for a in ancestors(d)))


def ancestors(rel: str) -> list[str]:
    """The proper ancestor folders of a relative path, shallowest first ("a/b/c": a, a/b)."""
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _walk_files(root: Path, faults: list[str]) -> list[tuple[str, int]]:
    """Every regular file under `root` as (relpath, size), listed by the one walker of
    evidence trees: nothing is followed or opened here, anything but a folder or a regular
    file with a sealable name is a fault."""
    try:
        entries = walk(root)
    except OSError as e:
        faults.append(f"{root}: cannot read: {e.strerror or e}")
        return []
    found: list[tuple[str, int]] = []
    for entry in entries:
        if entry.name_problem:
            fault = entry.name_problem
        elif entry.kind == "symlink":
            fault = "is a symlink; bundles hold regular files only"
        elif entry.too_deep:
            fault = f"folders nested deeper than {MAX_DEPTH} levels"
        elif entry.is_file:
            if os.access(f"{root}/{entry.rel}", os.R_OK, follow_symlinks=False):
                found.append((entry.rel, entry.size))
                continue
            fault = "is not readable"
        elif entry.is_dir:
            continue
        else:
            fault = f"is a {entry.kind}, not a regular file"
        faults.append(f"{root}/{printable(entry.rel)}: {fault}")
    return found


def _night_folders(roots: list[tuple[str, Path]], faults: list[str]) -> list[Path]:
    """The run folders the given night folders stand for (their journals' runs), each
    once, leaving out any the operator also gave."""
    given_names = {name for name, _ in roots}
    given_paths = {real for _, real in roots}
    found: list[Path] = []
    seen: set[Path] = set()
    for _, real in roots:
        if not os.path.isfile(real / NIGHT_RECORD) or os.path.islink(real / NIGHT_RECORD):
            continue
        folders, problems = night_run_folders(real, given_names)
        faults.extend(problems)
        for f in folders:
            if f not in given_paths and f not in seen:
                seen.add(f)
                found.append(f)
    return found


class _Roots:
    """The bundled folders so far, indexed so that each new one is checked against all of
    them in time proportional to its depth, not to their number."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Path]] = []  # (name under data/, real path)
        self.names: set[str] = set()
        self._paths: dict[Path, Path] = {}
        self._above: dict[Path, Path] = {}  # every ancestor of a root -> one root below it

    def overlap(self, real: Path) -> Path | None:
        """A root that is `real`, holds it, or lies inside it."""
        for p in (real, *real.parents):
            if p in self._paths:
                return self._paths[p]
        return self._above.get(real)

    def add(self, name: str, real: Path) -> None:
        self.items.append((name, real))
        self.names.add(name)
        self._paths[real] = real
        for p in real.parents:
            self._above.setdefault(p, real)


def _check_root(folder: Path, real: Path, roots: _Roots, faults: list[str]) -> bool:
    """Whether `folder` (at `real`) can be a bundled folder beside `roots`; faults say why not."""
    name = real.name
    if path_problem(name):
        faults.append(f"{folder}: folder name {name!r} cannot be used in a bundle")
        return False
    other = roots.overlap(real)
    if other is not None:
        faults.append(f"{folder}: overlaps {other}; give each folder once")
    if name in roots.names:
        faults.append(f"{folder}: another folder is also named {name!r}")
    return True


def collect_payload(folders: list[Path]) -> Payload:
    """Check the given run or night folders and list their files; InvalidInput lists every fault.
    A night's runs go to `data/<run-id>/`, their places in RUNS, so the summary's links resolve."""
    faults: list[str] = []
    index = _Roots()
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            faults.append(f"{folder}: not a folder (give run or night folders)")
            continue
        real = folder.resolve()
        if _check_root(folder, real, index, faults):
            index.add(real.name, real)
    named = [name for name, _ in index.items]
    for real in _night_folders(list(index.items), faults):
        if _check_root(real, real, index, faults):
            index.add(real.name, real)
    roots: list[tuple[str, Path]] = []
    files: list[PayloadFile] = []
    for name, real in index.items:
        entries = _walk_files(real, faults)
        rels = [rel for rel, _ in entries]
        night = NIGHT_RECORD in rels
        if night:
            entries = [(rel, size) for rel, size in entries if not left_out(rel, size)]
        if not find_run_dirs(rels) and not night:
            faults.append(f"{real}: no {RECORD} or {NIGHT_RECORD} in it; "
                          "not a run or night folder")
        if name == NIGHTS:
            faults.append(f"{real}: a folder named {NIGHTS!r} cannot be bundled; the name "
                          "holds the nights in a bundle (data/nights/<night>/)")
        where = arc_folder(name, night)  # a night keeps RUNS/nights/<night>'s place
        roots.append((where, real))
        files.extend(PayloadFile(f"{PAYLOAD_DIR}/{where}/{rel}", real, rel, size)
                     for rel, size in entries)
    if faults:
        raise InvalidInput("cannot bundle these folders", faults=faults)
    files.sort(key=lambda f: f.arcname)
    return Payload(files=files, roots=roots, named=named)

"""Each run's own seal (SHA256SUMS), checked inside a bundle.

A run folder that was already broken when it was bundled must fail verification even
though the bag's manifest matches it, so every SHA256SUMS is checked on its own terms:
it covers every file in its folder except those under a deeper folder with its own
SHA256SUMS (addenda). A run folder without one was never sealed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from harness.bundle.payload import SEAL_FILE, find_run_dirs
from harness.bundle.sums import Problem, compare, parse_sums


def _parent(path: str) -> str:
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent


def _under(path: str, folder: str) -> bool:
    return folder == "" or path.startswith(folder + "/")


def _owner(path: str, sealed: list[str]) -> str | None:
    """The deepest sealed folder that holds `path`, or None."""
    holders = [d for d in sealed if _under(path, d)]
    return max(holders, key=len) if holders else None


def check_seals(found: dict[str, str], read_text: Callable[[str], str]) -> list[Problem]:
    """Problems with every SHA256SUMS in a file set.

    `found` maps relpath -> sha256 hex of the files present; `read_text` reads one of them.
    Paths in the problems are relative to the same root as `found`.
    """
    sealed = sorted(_parent(p) for p in found if PurePosixPath(p).name == SEAL_FILE)
    problems: list[Problem] = []
    for run in find_run_dirs(found):
        if run not in sealed:
            problems.append(Problem("unsealed", run, f"run folder has no {SEAL_FILE}"))
    for folder in sealed:
        prefix = f"{folder}/" if folder else ""
        sums_path = f"{prefix}{SEAL_FILE}"
        try:
            listed, bad = parse_sums(read_text(sums_path), sums_path)
        except (OSError, UnicodeDecodeError) as e:
            problems.append(Problem("unreadable", sums_path, str(e)))
            continue
        problems.extend(bad)
        scope = {
            p[len(prefix):]: digest
            for p, digest in found.items()
            if p != sums_path and _owner(p, sealed) == folder
        }
        # A nested seal's own files are judged by that seal, even if this one lists them too.
        nested = {
            p[len(prefix):]: digest
            for p, digest in found.items()
            if p != sums_path and _under(p, folder) and _owner(p, sealed) != folder
        }
        scope.update({rel: nested[rel] for rel in listed if rel in nested})
        for problem in compare(listed, scope, sums_path):
            problems.append(Problem(problem.kind, prefix + problem.path, problem.detail))
    return problems

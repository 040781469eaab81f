"""SHA-256 of files, fast: large reads, and several files at once on several cores.

hashlib releases the GIL while it hashes a large buffer, so threads scale across cores.
Every file is opened through `harness.tree`, so hashing never blocks on a FIFO, never
reads a device, and never follows a symlink unless the caller says so (model folders
may be symlink farms, e.g. a Hugging Face snapshot; evidence trees never are).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.tree import open_beneath, open_regular

CHUNK = 1 << 20


def sha256_fd(fd: int) -> str:
    """Hex sha256 of an open file, read in 1 MiB chunks into one reused buffer."""
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(fd, "rb", buffering=0, closefd=False) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def sha256_file(path: Path, *, follow_symlinks: bool = False) -> str:
    """Hex sha256 of one regular file (`tree.NotRegular`, an OSError, for anything else)."""
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def sha256_beneath(root: Path, rel: str) -> str:
    """Hex sha256 of `root/rel`, with no symlink followed anywhere on the way."""
    fd = open_beneath(root, rel)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def _workers(workers: int | None) -> int:
    if workers is not None:
        return workers
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def sha256_many(paths: Iterable[Path], workers: int | None = None, *,
                follow_symlinks: bool = False) -> dict[Path, str]:
    """Hash many files; `workers` defaults to the cores this process may use."""
    paths = list(paths)
    workers = _workers(workers)

    def one(p: Path) -> str:
        return sha256_file(p, follow_symlinks=follow_symlinks)

    if workers <= 1 or len(paths) <= 1:
        return {p: one(p) for p in paths}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(paths, pool.map(one, paths), strict=True))


def sha256_tree(root: Path, rels: Iterable[str], workers: int | None = None) -> dict[str, str]:
    """Hash files inside an evidence tree by relative path, following no symlink."""
    rels = list(rels)
    workers = _workers(workers)
    if workers <= 1 or len(rels) <= 1:
        return {r: sha256_beneath(root, r) for r in rels}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(rels, pool.map(lambda r: sha256_beneath(root, r), rels), strict=True))


def sha256_tree_each(root: Path, rels: Iterable[str],
                     workers: int | None = None) -> dict[str, str | OSError]:
    """`sha256_tree`, but one file's failure (a symlink, a FIFO, gone) is its own result, an
    OSError, instead of stopping the rest: a verifier names every problem, not the first."""
    def one(r: str) -> str | OSError:
        try:
            return sha256_beneath(root, r)
        except OSError as e:
            return e

    rels = list(rels)
    workers = _workers(workers)
    if workers <= 1 or len(rels) <= 1:
        return {r: one(r) for r in rels}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(rels, pool.map(one, rels), strict=True))

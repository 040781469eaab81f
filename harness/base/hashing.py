"""SHA-256 of files, fast: large reads, several files at once on several cores (hashlib
releases the GIL). Files open through `harness.base.tree`, so hashing never blocks on a
FIFO, reads a device, or follows a symlink unless the caller says so (model folders).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from harness.base.tree import open_beneath, open_dir_beneath, open_regular

CHUNK = 1 << 20


def sha256_fd(fd: int) -> str:
    """Hex sha256 of an open file: small files in one read, large ones in 1 MiB chunks
    into one reused buffer."""
    h = hashlib.sha256()
    if os.fstat(fd).st_size < CHUNK:
        while data := os.read(fd, CHUNK):  # loops only if the file grew meanwhile
            h.update(data)
        return h.hexdigest()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(fd, "rb", buffering=0, closefd=False) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def _hash_owned(fd: int) -> str:
    """`sha256_fd` of a descriptor this call owns: closed whatever happens."""
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def sha256_file(path: Path, *, follow_symlinks: bool = False) -> str:
    """Hex sha256 of one regular file (`tree.NotRegular`, an OSError, for anything else)."""
    return _hash_owned(open_regular(path, follow_symlinks=follow_symlinks))


def sha256_beneath(root: Path, rel: str) -> str:
    """Hex sha256 of `root/rel`, with no symlink followed anywhere on the way."""
    return _hash_owned(open_beneath(root, rel))


def _workers(workers: int | None) -> int:
    if workers is not None:
        return workers
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def sha256_many(paths: Iterable[Path], workers: int | None = None, *,
                follow_symlinks: bool = False) -> dict[Path, str]:
    """Hash many files; `workers` defaults to the cores this process may use. Files under
    BIG are hashed at once on this thread (for a small file a thread costs more than the
    hash: the source seal's 170 files took 3x as long on threads), the others on threads."""
    paths = list(paths)
    workers = _workers(workers)

    def one(p: Path) -> str:
        return sha256_file(p, follow_symlinks=follow_symlinks)

    big = [p for p in paths if _size(p, follow_symlinks) >= BIG] if workers > 1 else []
    if len(big) <= 1:
        return {p: one(p) for p in paths}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(big, pool.map(one, big), strict=True))
        small = {p: one(p) for p in paths if p not in done}
    return {p: done[p] if p in done else small[p] for p in paths}


def _size(path: Path, follow_symlinks: bool) -> int:
    """The size that decides where a file is hashed; 0 when it cannot be read here (the hash
    then raises the file's own error, on this thread)."""
    try:
        return os.stat(path, follow_symlinks=follow_symlinks).st_size
    except OSError:
        return 0


BIG = 1 << 20  # files at least this large are hashed on worker threads
_OUTSTANDING = 64  # big files open at once at most (each holds a descriptor)


def _group(rels: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rel in rels:
        parent, _, name = rel.rpartition("/")
        groups.setdefault(parent, []).append(name)
    return groups


def sha256_tree_each(root: Path, rels: Iterable[str],
                     workers: int | None = None) -> dict[str, str | OSError]:
    """Hash files inside an evidence tree by relative path, following no symlink anywhere.
    One file's failure is its own result (an OSError), so a verifier names every problem;
    small files are hashed at once, large ones on `workers` threads."""
    rels = list(rels)
    out: dict[str, str | OSError] = {}
    pending: list[tuple[str, Future[str]]] = []
    workers = _workers(workers)
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        for parent, names in _group(rels).items():
            try:
                dir_fd = open_dir_beneath(root, parent)
            except OSError as e:
                out.update({(f"{parent}/{n}" if parent else n): e for n in names})
                continue
            try:
                for name in names:
                    rel = f"{parent}/{name}" if parent else name
                    try:
                        fd = open_regular(name, dir_fd=dir_fd)
                    except OSError as e:
                        out[rel] = e
                        continue
                    if workers > 1 and os.fstat(fd).st_size >= BIG:
                        pending.append((rel, pool.submit(_hash_owned, fd)))
                        if len(pending) >= _OUTSTANDING:
                            _collect(pending, out)
                    else:
                        try:
                            out[rel] = _hash_owned(fd)
                        except OSError as e:
                            out[rel] = e
            finally:
                os.close(dir_fd)
        _collect(pending, out)
    return {rel: out[rel] for rel in rels}


def _collect(pending: list[tuple[str, Future[str]]], out: dict[str, str | OSError]) -> None:
    for rel, fut in pending:
        try:
            out[rel] = fut.result()
        except OSError as e:
            out[rel] = e
    pending.clear()


def sha256_tree(root: Path, rels: Iterable[str], workers: int | None = None) -> dict[str, str]:
    """`sha256_tree_each`, raising the first file's error (sealing: all or nothing)."""
    got = sha256_tree_each(root, rels, workers)
    for value in got.values():
        if isinstance(value, OSError):
            raise value
    return got  # type: ignore[return-value]

"""`sha256_many` hashes small files on the calling thread and big ones on threads: whatever
the mix, each path gets its own file's digest, and a file that cannot be read raises."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from harness.base.hashing import BIG, sha256_many


def _files(tmp_path: Path, sizes: list[int]) -> list[Path]:
    out = []
    for i, size in enumerate(sizes):
        p = tmp_path / f"f{i}"
        p.write_bytes(os.urandom(min(size, 4096)) * (size // 4096) + os.urandom(size % 4096))
        out.append(p)
    return out


@pytest.mark.parametrize("sizes", [
    [10, 2000, 0],  # all small: no thread at all
    [BIG, 5, BIG + 1, 300, 2 * BIG],  # big and small mixed
    [BIG + 7],  # one big file
])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_each_path_gets_its_own_files_digest(tmp_path, sizes, workers) -> None:
    paths = _files(tmp_path, sizes)
    got = sha256_many(paths, workers)
    assert list(got) == paths
    assert got == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_a_missing_file_raises_among_big_and_small(tmp_path) -> None:
    paths = _files(tmp_path, [BIG, 3, BIG])
    with pytest.raises(OSError):
        sha256_many([*paths, tmp_path / "gone"], 2)


def test_a_symlink_is_refused_unless_followed(tmp_path) -> None:
    [big] = _files(tmp_path, [BIG])
    link = tmp_path / "link"
    link.symlink_to(big)
    with pytest.raises(OSError):
        sha256_many([link, *_files(tmp_path, [BIG, 1])], 2)
    assert sha256_many([link], 2, follow_symlinks=True)[link] == \
        hashlib.sha256(big.read_bytes()).hexdigest()

"""The model stat cache: a stored digest stands only while all five stat facts are the same."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from harness.measure import modelcache
from harness.measure.modelcache import SCHEMA, cacheable, hash_files, load, lookup, stat_key

KEY = (2049, 1234, 10, 1_000_000_000_000, 1_000_000_000_500)
HEX = "a" * 64


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_lookup_hits_only_on_the_exact_key():
    assert lookup({"stat": list(KEY), "sha256": HEX}, KEY) == HEX


@pytest.mark.parametrize("field", range(5))
def test_lookup_misses_when_any_stat_fact_differs(field):
    changed = list(KEY)
    changed[field] += 1
    assert lookup({"stat": list(KEY), "sha256": HEX}, tuple(changed)) is None


@pytest.mark.parametrize("entry", [None, "x", {}, {"stat": list(KEY)},
                                   {"stat": list(KEY), "sha256": "short"},
                                   {"stat": "nope", "sha256": HEX}])
def test_lookup_ignores_malformed_entries(entry):
    assert lookup(entry, KEY) is None


def test_cacheable_needs_a_still_file_changed_long_enough_ago():
    changed_at = max(KEY[3], KEY[4])
    assert cacheable(KEY, KEY, changed_at + modelcache.RACY_NS)
    assert not cacheable(KEY, KEY, changed_at + modelcache.RACY_NS - 1)
    moved = (*KEY[:3], KEY[3] + 1, KEY[4])
    assert not cacheable(KEY, moved, changed_at + 10 * modelcache.RACY_NS)
    # a timestamp in the future (clock skew) is never trusted
    assert not cacheable(KEY, KEY, changed_at - 1)


def model(tmp_path: Path) -> dict[str, Path]:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_bytes(b'{"layers": 2}')
    with open(d / "weights.bin", "wb") as f:
        f.truncate(3 << 20)  # sparse
    return {"config.json": d / "config.json", "weights.bin": d / "weights.bin"}


def test_digests_without_a_cache_match_hashlib(tmp_path):
    paths = model(tmp_path)
    got = hash_files(paths, None)
    assert got == {"config.json": sha(b'{"layers": 2}'), "weights.bin": sha(bytes(3 << 20))}
    assert not list(tmp_path.glob("**/*.json.lock"))


def test_a_stored_digest_is_used_while_the_stat_is_unchanged(tmp_path):
    paths = model(tmp_path)
    cache = tmp_path / "cache" / "hashes.json"
    hash_files(paths, cache, racy_ns=0)
    doc = json.loads(cache.read_text())
    assert doc["schema"] == SCHEMA and len(doc["entries"]) == 2
    # Plant a digest under the file's true stat: only a cache hit can return it.
    real = os.path.realpath(paths["config.json"])
    doc["entries"][real]["sha256"] = HEX
    cache.write_text(json.dumps(doc))
    assert hash_files(paths, cache)["config.json"] == "sha256:" + HEX


def test_a_rewrite_with_the_same_size_and_mtime_is_still_hashed(tmp_path):
    paths = model(tmp_path)
    cache = tmp_path / "hashes.json"
    first = hash_files(paths, cache, racy_ns=0)
    p = paths["config.json"]
    st = p.stat()
    p.write_bytes(b'{"layers": 3}')  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime moves
    assert stat_key(p.stat())[3] == st.st_mtime_ns
    again = hash_files(paths, cache, racy_ns=0)
    assert again["config.json"] == sha(b'{"layers": 3}') != first["config.json"]
    assert again["weights.bin"] == first["weights.bin"]


def test_a_replaced_file_is_hashed(tmp_path):
    paths = model(tmp_path)
    cache = tmp_path / "hashes.json"
    hash_files(paths, cache, racy_ns=0)
    p = paths["weights.bin"]
    tmp = p.with_name("new")
    tmp.write_bytes(b"x" * (3 << 20))
    os.replace(tmp, p)  # new inode
    assert hash_files(paths, cache, racy_ns=0)["weights.bin"] == sha(b"x" * (3 << 20))


def test_recently_changed_files_are_not_stored(tmp_path):
    paths = model(tmp_path)
    cache = tmp_path / "hashes.json"
    hash_files(paths, cache)  # files were just written: inside the racy window
    assert load(cache) == {}


@pytest.mark.parametrize("garbage", ["", "{", "[]", '{"schema": "other", "entries": {}}',
                                     '{"schema": "harness.model-hashes/v1", "entries": []}'])
def test_an_unreadable_cache_is_empty_and_replaced(tmp_path, garbage):
    paths = model(tmp_path)
    cache = tmp_path / "hashes.json"
    cache.write_text(garbage)
    assert hash_files(paths, cache, racy_ns=0)["config.json"] == sha(b'{"layers": 2}')
    assert len(load(cache)) == 2


def test_an_unwritable_cache_is_skipped(tmp_path):
    paths = model(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    got = hash_files(paths, blocker / "hashes.json", racy_ns=0)
    assert got["config.json"] == sha(b'{"layers": 2}')


def test_entries_of_vanished_files_are_dropped(tmp_path):
    paths = model(tmp_path)
    cache = tmp_path / "hashes.json"
    hash_files(paths, cache, racy_ns=0)
    paths["config.json"].unlink()
    del paths["config.json"]
    (tmp_path / "model" / "other").write_bytes(b"o")
    hash_files({**paths, "other": tmp_path / "model" / "other"}, cache, racy_ns=0)
    assert sorted(Path(p).name for p in load(cache)) == ["other", "weights.bin"]


def test_a_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        hash_files({"gone": tmp_path / "gone"}, tmp_path / "hashes.json")


def test_default_cache_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert modelcache.default_cache_path() == tmp_path / "harness" / "model-hashes.json"

"""Model re-checks without re-reading the model: a stat cache of each file's sha256.

A run hashes its model before and after the container; the cache keeps each file's last
digest with its (device, inode, size, mtime_ns, ctime_ns), and a digest stands only while
all five match. Like git's index, one is stored only when the file stayed still while read
and its last change is older than RACY_NS. An optimisation, never evidence."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.base import flock
from harness.base.atomic import write_json
from harness.base.errors import EnvironmentFault
from harness.base.hashing import sha256_many

SCHEMA = "harness.model-hashes/v1"
RACY_NS = 2_000_000_000
LOCK_TIMEOUT_S = 5.0

StatKey = tuple[int, int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    """The five facts that must all be unchanged for a stored digest to stand."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def lookup(entry: object, key: StatKey) -> str | None:
    """Pure: the stored hex digest when `entry` was taken under exactly `key`, else None."""
    if not isinstance(entry, dict):
        return None
    stored, digest = entry.get("stat"), entry.get("sha256")
    if not isinstance(stored, list) or not isinstance(digest, str) or len(digest) != 64:
        return None
    return digest if tuple(stored) == key else None


def cacheable(before: StatKey, after: StatKey, now_ns: int, racy_ns: int = RACY_NS) -> bool:
    """Pure: may a digest read between stats `before` and `after` be stored at `now_ns`?"""
    return before == after and now_ns - max(after[3], after[4]) >= racy_ns


def default_cache_path() -> Path:
    """$XDG_CACHE_HOME/harness/model-hashes.json (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "harness" / "model-hashes.json"


def load(cache_path: Path) -> dict[str, dict]:
    """The stored entries by absolute path; missing or unreadable means empty."""
    try:
        doc = json.loads(Path(cache_path).read_text("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return {}
    entries = doc.get("entries")
    return entries if isinstance(entries, dict) else {}


def save(cache_path: Path, updates: dict[str, dict]) -> bool:
    """Merge `updates` into the cache atomically under a lock; False when it could not write."""
    cache_path = Path(cache_path)
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        with flock.exclusive(cache_path.with_name(cache_path.name + ".lock"),
                             "model-hash cache lock", timeout=LOCK_TIMEOUT_S):
            entries = {p: e for p, e in load(cache_path).items() if os.path.exists(p)}
            entries.update(updates)
            write_json(cache_path, {"schema": SCHEMA, "entries": entries})
    except (OSError, EnvironmentFault):
        return False
    return True


def hash_files(paths: dict[str, Path], cache_path: Path | None,
               *, racy_ns: int = RACY_NS) -> dict[str, str]:
    """"sha256:<hex>" per relative name in `paths`, from the cache where the stat is unchanged,
    else by a full hash; OSError when a file cannot be read. `cache_path` None: no cache."""
    real = {rel: os.path.realpath(p) for rel, p in paths.items()}
    entries = load(cache_path) if cache_path is not None else {}
    before: dict[str, StatKey] = {}
    digests: dict[str, str] = {}
    for rel, path in real.items():
        before[rel] = stat_key(os.stat(path))
        hit = lookup(entries.get(path), before[rel])
        if hit is not None:
            digests[rel] = hit
    misses = [rel for rel in real if rel not in digests]
    if misses:
        fresh = sha256_many(Path(real[rel]) for rel in misses)
        now = time.time_ns()
        updates = {}
        for rel in misses:
            digests[rel] = fresh[Path(real[rel])]
            after = stat_key(os.stat(real[rel]))
            if cacheable(before[rel], after, now, racy_ns):
                updates[real[rel]] = {"stat": list(after), "sha256": digests[rel]}
        if cache_path is not None and updates:
            save(cache_path, updates)
    return {rel: "sha256:" + digests[rel] for rel in paths}

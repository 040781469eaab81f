"""Evidence hashing against `sha256sum`, and model re-checks with the stat cache.

Both sides read the same files from the page cache (a first pass warms it), so the figure
is hashing speed, not disk speed. The one-core sides are pinned with `taskset -c 0`; the
harness side times its hashing inside a child process, so interpreter start is not counted
(the pipeline hashes in an interpreter that is already running).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import GB, MB, Config, alternate, check, fill, median, sparse, wall

CHILD = """
import json, sys, time
from pathlib import Path
from harness.base.hashing import sha256_file, sha256_many
mode, paths = sys.argv[1], [Path(p) for p in sys.argv[2:]]
t0 = time.perf_counter()
if mode == "one":
    digests = {str(p): sha256_file(p) for p in paths}
else:
    digests = {str(p): d for p, d in sha256_many(paths, workers=int(mode)).items()}
print(json.dumps({"s": time.perf_counter() - t0, "digests": digests}))
"""


def _child(mode: str, paths: list[Path], cores: str | None) -> tuple[float, dict]:
    argv = [sys.executable, "-c", CHILD, mode, *map(str, paths)]
    if cores:
        argv = ["taskset", "-c", cores, *argv]
    r = subprocess.run(argv, capture_output=True, text=True)
    check(r, "hashing child")
    doc = json.loads(r.stdout)
    return doc["s"], doc["digests"]


def _sha256sum(paths: list[Path], cores: str | None = "0") -> tuple[float, dict]:
    argv = ["sha256sum", *map(str, paths)]
    if cores:
        argv = ["taskset", "-c", cores, *argv]
    dt, r = wall(argv, text=True)
    check(r, "sha256sum")
    digests = {}
    for line in r.stdout.splitlines():
        digest, _, name = line.partition("  ")
        digests[name] = digest
    return dt, digests


def run_hash(cfg: Config) -> dict[str, float]:
    folder = cfg.work / "hash"
    folder.mkdir(parents=True)
    total = cfg.size(2 * GB, 256 * MB)
    count = 8
    block = os.urandom(16 * MB)
    paths = [folder / f"part{i}.bin" for i in range(count)]
    for p in paths:
        fill(p, total // count, block)
    _sha256sum(paths, None)  # warm the page cache
    seen: dict[str, dict] = {}

    def harness() -> float:
        s, seen["harness"] = _child("one", paths, "0")
        return s

    def coreutils() -> float:
        s, seen["sha256sum"] = _sha256sum(paths)
        return s

    h, c = alternate(3, [harness, coreutils])
    if seen["harness"] != seen["sha256sum"]:
        raise RuntimeError("sha256sum and harness.base.hashing disagree")

    def one_worker() -> float:
        return _child("1", paths, None)[0]

    def two_workers() -> float:
        return _child("2", paths, None)[0]

    w1, w2 = alternate(3, [one_worker, two_workers])
    return {
        "hash_ratio": round(median([b / a for a, b in zip(h, c, strict=True)]), 3),
        "hash_harness_mb_s": round(total / MB / median(h), 1),
        "hash_sha256sum_mb_s": round(total / MB / median(c), 1),
        "hash_parallel_speedup": round(median([a / b for a, b in zip(w1, w2, strict=True)]), 3),
        "hash_parallel_mb_s": round(total / MB / median(w2), 1),
        "hash_gb": round(total / GB, 2),
    }


def run_model(cfg: Config) -> dict[str, float]:
    from harness.measure.modelcache import RACY_NS, hash_files

    folder = cfg.work / "model"
    folder.mkdir(parents=True)
    total = cfg.size(10 * GB, 512 * MB)
    shards = 5
    paths = {"config.json": folder / "config.json"}
    paths["config.json"].write_text('{"architectures": ["Bench"], "layers": 2}')
    for i in range(shards):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        sparse(folder / name, total // shards)
        paths[name] = folder / name
    cache = cfg.work / "model-cache" / "model-hashes.json"
    time.sleep(RACY_NS / 1e9 + 0.1)  # the files must be older than the racy window

    files = list(paths.values())
    full: dict[str, str] = {}

    def harness_full() -> float:
        t0 = time.perf_counter()
        full.update(hash_files(paths, None))
        return time.perf_counter() - t0

    def coreutils() -> float:
        return _sha256sum(files, None)[0]

    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)  # warm
    f, c = alternate(1 if total > 2 * GB else 3, [harness_full, coreutils])
    hash_files(paths, cache)  # first check with the cache: a full hash, stored
    rechecks = []
    for _ in range(5):
        t0 = time.perf_counter()
        got = hash_files(paths, cache)
        rechecks.append(time.perf_counter() - t0)
        if got != full:
            raise RuntimeError("the stat cache returned a digest the full hash does not")
    return {
        "model_recheck_s": round(median(rechecks), 5),
        "model_fullhash_s": round(median(f), 2),
        "model_fullhash_ratio": round(median(c) / median(f), 3),
        "model_sha256sum_s": round(median(c), 2),
        "model_gb": round(total / GB, 2),
    }

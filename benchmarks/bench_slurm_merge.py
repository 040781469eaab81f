"""`bundle merge` + `bundle verify` of a Slurm night's drop (one bundle per run) against
what the tools do on the same files; part of `--only slurm` (benchmarks/bench_slurm.py),
measured whether or not a cluster comes up, since merging needs none."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import Config, check, median, rmtree

HARNESS = [sys.executable, "-m", "harness"]


# ---- 3. bundle merge + verify of a drop ----------------------------------------------------

def _drop(cfg: Config, work: Path, n: int) -> list[Path]:
    """N per-run bundles, as the jobs of a night leave them in `<drop>/bundles`: copies of
    one real sealed run, each with a log of its own, each exported on its own."""
    from benchmarks.bench_evidence import _copies, _real_run
    from harness.readers.bundle.export import export_bundle

    runs = _copies(_real_run(cfg, "merge-src"), work / "runs", n)
    (work / "drop").mkdir()
    bundles = []
    for run in runs:
        bundles.append(work / "drop" / f"{run.name}.tar.gz")
        export_bundle([run], bundles[-1])
    rmtree(work / "runs")
    return bundles


def _harness_merge(bundles: list[Path], out: Path) -> float:
    t0 = time.perf_counter()
    check(subprocess.run([*HARNESS, "bundle", "merge", *map(str, bundles), "-o", str(out)],
                         capture_output=True), "harness bundle merge")
    check(subprocess.run([*HARNESS, "bundle", "verify", str(out)], capture_output=True),
          "harness bundle verify")
    dt = time.perf_counter() - t0
    out.unlink()
    return dt


def _bare_merge(bundles: list[Path], work: Path) -> float:
    """The tools on the same files: check each input (tar -xzf, sha256sum -c of its own
    manifest), then hash the union into one archive and check that as verify does."""
    from benchmarks.bench_evidence import _bare_export, _bare_verify

    rmtree(work)
    (work / "union").mkdir(parents=True)
    t0 = time.perf_counter()
    for i, bundle in enumerate(bundles):
        into = work / f"in-{i}"
        into.mkdir()
        check(subprocess.run(["tar", "-xzf", str(bundle), "-C", str(into)],
                             capture_output=True), "tar -xzf")
        [top] = into.iterdir()
        check(subprocess.run(["sha256sum", "-c", "--quiet", "manifest-sha256.txt"], cwd=top,
                             capture_output=True), "sha256sum -c")
        for run in (top / "data").iterdir():
            run.rename(work / "union" / run.name)
    runs = sorted((work / "union").iterdir())
    _bare_export(runs, work / "merged.tar.gz")
    _bare_verify(work / "merged.tar.gz", work / "check")
    dt = time.perf_counter() - t0
    rmtree(work)
    return dt


def run_merge(cfg: Config) -> dict[str, float]:
    n = cfg.size(200, 50)
    work = cfg.work / "slurm-merge"
    bundles = _drop(cfg, work, n)
    rounds = cfg.size(3, 2)
    h, b = [], []
    for i in range(rounds):
        sides = [lambda: h.append(_harness_merge(bundles, work / "night.tar.gz")),
                 lambda: b.append(_bare_merge(bundles, work / "bare"))]
        for side in sides[i % 2:] + sides[: i % 2]:
            side()
    rmtree(work)
    return {"slurm_merge_verify_ratio": round(median([x / y for x, y in zip(h, b,
                                                                            strict=True)]), 3),
            "slurm_merge_verify_s": round(median(h), 2),
            "slurm_merge_tar_sha256_s": round(median(b), 2),
            "slurm_merge_bundles": n}

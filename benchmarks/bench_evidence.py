"""Evidence at scale: `bundle export` and `bundle verify` against `tar` + `sha256sum`, and
`harness report` over a year of nights.

Two shapes, each measured in one run against the bare tools on the very same files:
- many runs: N copies of one real sealed run folder (one `harness run` of a trivial
  control; the copies differ only in their folder names), as a night of many controls;
- one run with a large log: a real run folder whose stdout.log is replaced by `size` bytes
  and sealed again (`write_manifest`), as a chatty engine's log.

The bare side does the same work the bundle does: hash every file (`sha256sum`), write one
gzip tar of the files and the manifest; verify is `tar -xzf` then `sha256sum -c`. Ratios
are harness time / bare time (lower is better; 1.0: as fast as the tools). The harness's
peak RSS while exporting and verifying is reported to show memory stays flat as the
evidence grows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.common import GB, MB, Config, Project, RssPoller, check, fill, median, rmtree
from harness.measure.runfolder.manifest import make_read_only, write_manifest

TRIVIAL = 'command: ["true"]\ntimeout: 1m\n'
HARNESS = [sys.executable, "-m", "harness"]


def _real_run(cfg: Config, name: str) -> Path:
    proj = Project(cfg.work / name, cfg.image_id)
    proj.control("trivial", TRIVIAL)
    r = subprocess.run(proj.run_argv(proj.campaign(name, ["trivial"])), capture_output=True)
    check(r, "harness run (the run folder to copy)")
    return proj.run_dirs()[0]


def _log_block(size: int) -> bytes:
    """Log-like text (timestamps, counters, hex ids), so gzip compresses it as it would a
    real engine log (a few times), not a repeated pattern (hundreds of times, which the
    bundle reader rightly refuses as a decompression bomb)."""
    lines, i = [], 0
    while sum(map(len, lines)) < size:
        lines.append(f"INFO 11-30 18:{i % 60:02d}:{i % 59:02d}.{i % 997:03d} [engine.py:{i % 400}] "
                     f"step {i} tokens={i * 7 % 4096} id={os.urandom(8).hex()}\n".encode())
        i += 1
    return b"".join(lines)[:size]


def _reseal(run: Path, log: bytes) -> None:
    """Give a copied run its own stdout.log and seal it again (synthetic evidence: only the
    benchmark does this; a sealed folder of the harness is never rewritten)."""
    for p in [run, *run.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    (run / "SHA256SUMS").unlink()
    (run / "logs" / "stdout.log").write_bytes(log)
    write_manifest(run)
    make_read_only(run)


def _copies(src: Path, dest: Path, n: int) -> list[Path]:
    """N runs shaped like `src`, each with a log of its own (copies of one folder would
    compress into nothing and measure no real night)."""
    dest.mkdir(parents=True)
    out = []
    for i in range(n):
        target = dest / f"run-{i:05d}"
        shutil.copytree(src, target)
        _reseal(target, _log_block(8 * 1024))
        out.append(target)
    return out


def _timed(argv: list[str], cwd: Path | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    poller = RssPoller(proc.pid)
    poller.start()
    _, err = proc.communicate()
    dt = time.perf_counter() - t0
    poller.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {err.decode()[-2000:]}")
    return dt, poller.peak_mb()


def _bare_export(runs: list[Path], out: Path) -> float:
    """sha256sum of every file into a manifest, then one gzip tar of files + manifest."""
    base = runs[0].parent
    rels = sorted(str(p.relative_to(base)) for r in runs for p in r.rglob("*") if p.is_file())
    t0 = time.perf_counter()
    with open(out.with_suffix(".sums"), "wb") as sums:
        check(subprocess.run(["xargs", "-0", "sha256sum", "--"], cwd=base, stdout=sums,
                             input="\0".join(rels).encode(), stderr=subprocess.PIPE),
              "sha256sum")
    check(subprocess.run(["tar", "-czf", str(out), "-C", str(base), "--null", "-T", "-",
                          "-C", str(out.parent), out.with_suffix(".sums").name],
                         input="\0".join(rels).encode(), capture_output=True), "tar -czf")
    return time.perf_counter() - t0


def _bare_verify(archive: Path, into: Path) -> float:
    rmtree(into)
    into.mkdir(parents=True)
    t0 = time.perf_counter()
    check(subprocess.run(["tar", "-xzf", str(archive), "-C", str(into)], capture_output=True),
          "tar -xzf")
    check(subprocess.run(["sha256sum", "-c", "--quiet", archive.with_suffix(".sums").name],
                         cwd=into, capture_output=True), "sha256sum -c")
    dt = time.perf_counter() - t0
    rmtree(into)
    return dt


def _pairs(work: Path, runs: list[Path], rounds: int) -> dict[str, list[float]]:
    """Export and verify, harness and bare, alternating which goes first each round."""
    got: dict[str, list[float]] = {k: [] for k in ("hx", "bx", "hv", "bv", "hx_mb", "hv_mb")}
    for i in range(rounds):
        bundle, bare = work / f"bundle-{i}.tar.gz", work / f"bare-{i}.tar.gz"
        sides = [("h", bundle), ("b", bare)] if i % 2 == 0 else [("b", bare), ("h", bundle)]
        for side, out in sides:
            if side == "h":
                dt, mb = _timed([*HARNESS, "bundle", "export", *map(str, runs), "-o", str(out)])
                got["hx"].append(dt)
                got["hx_mb"].append(mb)
                dt, mb = _timed([*HARNESS, "bundle", "verify", str(out)])
                got["hv"].append(dt)
                got["hv_mb"].append(mb)
            else:
                got["bx"].append(_bare_export(runs, out))
                got["bv"].append(_bare_verify(out, work / "bare-extract"))
            out.unlink()
            out.with_suffix(".sums").unlink(missing_ok=True)
    return got


def _figures(prefix: str, got: dict[str, list[float]]) -> dict[str, float]:
    return {f"{prefix}_export_ratio": round(median(got["hx"]) / median(got["bx"]), 3),
            f"{prefix}_verify_ratio": round(median(got["hv"]) / median(got["bv"]), 3),
            f"{prefix}_export_s": round(median(got["hx"]), 2),
            f"{prefix}_verify_s": round(median(got["hv"]), 2),
            f"{prefix}_tar_sha256_export_s": round(median(got["bx"]), 2),
            f"{prefix}_tar_sha256_verify_s": round(median(got["bv"]), 2),
            f"{prefix}_export_rss_mb": round(max(got["hx_mb"]), 1),
            f"{prefix}_verify_rss_mb": round(max(got["hv_mb"]), 1)}


def run_bundle(cfg: Config) -> dict[str, float]:
    """Many runs (1,000; quick: 100) and one run with a large log (2 GiB; quick: 200 MiB)."""
    work = cfg.work / "evidence"
    work.mkdir(parents=True)
    src = _real_run(cfg, "evidence-src")
    n = cfg.size(1000, 100)
    runs = _copies(src, work / "many", n)
    out = _figures("bundle_1000" if n == 1000 else f"bundle_{n}", _pairs(work, runs, 2))
    rmtree(work / "many")

    big = work / "big" / "run-big"
    shutil.copytree(src, big)
    size = cfg.size(2 * GB, 200 * MB)
    _reseal(big, b"")
    for p in [big, *big.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    (big / "SHA256SUMS").unlink()
    fill(big / "logs" / "stdout.log", size, _log_block(MB))
    write_manifest(big)
    make_read_only(big)
    out.update(_figures("bundle_big_log", _pairs(work, [big], 1)))
    out["bundle_big_log_mb"] = size // MB
    rmtree(work)
    return out


def _nights(cfg: Config, runs: list[Path], days: range) -> tuple[Path, Path]:
    """A night folder of one campaign for each of `days`, a night a day, each journal holding
    one row per run folder (accepted; every fifth night one row refused), as `harness night`
    leaves them. Returns (the campaign file, the runs folder)."""
    from harness.measure.nightfolder.journal import Journal
    from harness.measure.nightfolder.naming import JOURNAL_NAME, night_name

    proj = Project(cfg.work / "report365", cfg.image_id)
    camp = proj.campaign("report365", ["trivial"])
    base = datetime(2025, 12, 1, 2, 0, tzinfo=UTC)
    plan = [(f"control-{i:02d}", 0) for i in range(len(runs))]
    for day in days:
        at = base + timedelta(days=day)
        folder = runs[0].parent / "nights" / night_name("report365", at.strftime("%Y%m%dT%H%M%SZ"))
        folder.mkdir(parents=True)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        with Journal.create(folder / JOURNAL_NAME, campaign="report365",
                            campaign_file=str(camp), plan=plan, now=lambda s=stamp: s) as j:
            for row, run in zip(j.rows(), runs, strict=True):
                row = j.mark_running(row, run.name, str(run))
                if day % 5 == 0 and row.plan_index == 0:
                    j.finish(row, "refused", "GATE0-FIELD-DIFFERS: compilation.custom_ops differs")
                else:
                    j.finish(row, "accepted")
    return camp, runs[0].parent


def run_report(cfg: Config) -> dict[str, float]:
    """`harness report` over 100 nights, then over a year of them (365 x 20 controls; quick:
    10, then 30): the time of the year, and its peak RSS beside the 100 nights' (memory
    stays flat as the history grows)."""
    work = cfg.work / "report"
    work.mkdir(parents=True)
    src = _real_run(cfg, "report-src")
    runs, done = _copies(src, work / "runs", 20), 0
    out: dict[str, float] = {}
    for nights in (cfg.size(100, 10), cfg.size(365, 30)):
        camp, runs_dir = _nights(cfg, runs, range(done, nights))
        done = nights
        for fmt in ("md", "html"):
            times, peaks = [], []
            for _ in range(3):
                dt, mb = _timed([*HARNESS, "report", str(camp), "--runs-dir", str(runs_dir),
                                 "--format", fmt])
                times.append(dt)
                peaks.append(mb)
            key = f"report_{nights}" + ("" if fmt == "md" else "_html")
            out[f"{key}_s"] = round(median(times), 2)
            out[f"{key}_rss_mb"] = round(max(peaks), 1)
    rmtree(work)
    return out

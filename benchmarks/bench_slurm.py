"""The Slurm path (issue 13, issue 15 item 1): GPU idle between controls on one node, the
cost of submitting and polling 1,000 queued jobs, and `bundle merge` + `verify` of the
drop's per-run bundles, each against a baseline measured in the same run.

A private cluster is brought up under the work folder by scripts/slurm-cluster.sh (real
slurmctld and slurmd; one node with one fake GPU, so Slurm itself serialises the jobs on
the GPU). Where it cannot be brought up (no root to install Slurm, say) the two cluster
figures are skipped with a note in `env.notes`; the merge figure needs no cluster.

- `slurm_idle_gap_*`: the same campaign of trivial controls as one `harness night` on this
  host and as `harness night --executor slurm`, alternating; a gap is container N finished
  → container N+1 started (outcome.json stamps of the sealed runs), as `handoff_s`.
- `slurm_submit_*`, `slurm_poll_*`: the executor's own `calls.submit` and `calls.poll`
  for 1,000 jobs into a partition that is DOWN (Slurm queues them and never starts one),
  alternating in chunks with the bare `sbatch` of the same argv; then all are cancelled.
- `slurm_merge_verify_*`: N per-run bundles (the drop of a night) merged and the result
  verified, against what the tools do on the same files: `tar -xzf` + `sha256sum -c` of
  each input, `sha256sum` + `tar -czf` of the union, `tar -xzf` + `sha256sum -c` of it.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import (
    REPO,
    Config,
    Project,
    check,
    median,
    parse_time,
    rmtree,
)

SCRIPT = REPO / "scripts" / "slurm-cluster.sh"
HARNESS_BIN = str(Path(sys.executable).parent / "harness")
HARNESS = [sys.executable, "-m", "harness"]
TRIVIAL = 'command: ["true"]\ntimeout: 1m\n'
HOLD_PARTITION = "benchhold"


# ---- pure helpers --------------------------------------------------------------------------

def container_spans(outcomes: list[dict]) -> list[tuple[float, float]]:
    """(started, finished) epoch seconds of each run's container, in start order; a run
    without both stamps (refused before launch) has no container and is left out. Pure."""
    spans = []
    for o in outcomes:
        start, end = o.get("container_started_at"), o.get("container_finished_at")
        if isinstance(start, str) and isinstance(end, str):
            spans.append((parse_time(start), parse_time(end)))
    return sorted(spans)


def idle_gaps(spans: list[tuple[float, float]]) -> list[float]:
    """GPU idle between consecutive containers: each start minus the previous finish. Pure."""
    return [b[0] - a[1] for a, b in itertools.pairwise(sorted(spans))]


def lock_to_start(records: list[dict], spans: list[tuple[float, float]]) -> list[float]:
    """Run N's GPU lock released → run N+1's container started, with `records` (run.json)
    in the same start order as `spans`. Pure."""
    released = [parse_time(r["lock"]["released"]) for r in records]
    return [nxt[0] - rel for rel, nxt in zip(released, spans[1:], strict=False)]


def round_ratio(a: list[list[float]], b: list[list[float]]) -> float:
    """Median over rounds of median(a) / median(b) per round: the load of the shared
    machine drifts between rounds, so each ratio pairs the sides of one round. Pure."""
    ratios = [median(x) / median(y) for x, y in zip(a, b, strict=True) if x and y]
    return median(ratios)


# ---- the cluster ----------------------------------------------------------------------------

def cluster_up(where: Path, nodes: int, gpus: int) -> tuple[dict[str, str] | None, str]:
    """The clients' environment for a private cluster, or None and why not."""
    import os

    try:
        r = subprocess.run(["bash", str(SCRIPT), "up", str(where), str(nodes), str(gpus)],
                           capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, "scripts/slurm-cluster.sh up took over 600 s"
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines or not lines[-1].startswith("export SLURM_CONF="):
        return None, f"exit {r.returncode}: {r.stderr.strip()[-500:]}"
    return {**os.environ, "SLURM_CONF": lines[-1].split("=", 1)[1]}, ""


def cluster_down(where: Path) -> None:
    subprocess.run(["bash", str(SCRIPT), "down", str(where)], capture_output=True, timeout=120)


# ---- 1. the idle gap between controls on one node -------------------------------------------

def _night(cfg: Config, proj: Project, camp: Path, env: dict[str, str], extra: list[str],
           ) -> tuple[list[float], list[float]]:
    """One night of `camp`: (container gaps, lock-release → next-start) of its runs."""
    before = set(proj.run_dirs())
    r = subprocess.run([*HARNESS, "night", str(camp), "--runs-dir", str(proj.runs), "--new",
                        "--json-lines", *extra], capture_output=True, text=True, env=env,
                       cwd=proj.root, timeout=900)
    ran = []  # (container span, run.json) of each run that started a container
    for d in sorted(set(proj.run_dirs()) - before):
        rec = json.loads((d / "run.json").read_text())
        if rec["status"] != "accepted":
            cfg.notes.append(f"slurm idle gap: {d.name} {rec['status']}: {rec['reasons']}")
        ran += [(span, rec) for span in
                container_spans([json.loads((d / "outcome.json").read_text())])]
    ran.sort(key=lambda x: x[0])
    spans, records = [s for s, _ in ran], [rec for _, rec in ran]
    if len(spans) < 2:
        check(r, f"harness night {' '.join(extra)}")
        raise RuntimeError(f"harness night {' '.join(extra)}: {len(spans)} containers ran")
    return idle_gaps(spans), lock_to_start(records, spans)


def run_idle_gap(cfg: Config, env: dict[str, str]) -> dict[str, float]:
    n = cfg.size(4, 3)
    rounds = cfg.size(3, 2)
    proj = Project(cfg.work / "slurm-gap", cfg.image_id)
    names = [f"short{i}" for i in range(n)]
    for name in names:
        proj.control(name, TRIVIAL)
    camp = proj.campaign("gap", names)
    drop = ["--drop", str(proj.root / "drop")]
    sides = {"local": [], "slurm": [], "slurm_jobs1": []}
    locks = {"local": [], "slurm": [], "slurm_jobs1": []}
    argv = {"local": [], "slurm": ["--executor", "slurm", *drop],
            "slurm_jobs1": ["--executor", "slurm", "--jobs", "1", *drop]}
    order = list(sides)
    for i in range(rounds):
        for side in order[i % 3:] + order[: i % 3]:
            gaps, lock_gaps = _night(cfg, proj, camp, env, argv[side])
            sides[side].append(gaps)
            locks[side].append(lock_gaps)
    flat = {k: [g for r in v for g in r] for k, v in sides.items()}
    return {
        "slurm_idle_gap_ratio": round(round_ratio(sides["slurm"], sides["local"]), 3),
        "slurm_idle_gap_s": round(median(flat["slurm"]), 3),
        "slurm_idle_gap_local_s": round(median(flat["local"]), 3),
        "slurm_idle_gap_jobs1_s": round(median(flat["slurm_jobs1"]), 3),
        "slurm_idle_gap_jobs1_ratio": round(round_ratio(sides["slurm_jobs1"], sides["local"]),
                                            3),
        "slurm_idle_gap_max_s": round(max(flat["slurm"]), 3),
        "slurm_lock_to_start_s": round(median([g for r in locks["slurm"] for g in r]), 3),
        "slurm_lock_to_start_local_s": round(median([g for r in locks["local"] for g in r]),
                                             3),
    }


# ---- 2. submit and poll 1,000 queued jobs ---------------------------------------------------

def _queue(cfg: Config, env: dict[str, str], n: int):
    """A DOWN partition that queues and never starts, and what to submit into it."""
    from harness.slurm.job import ControlTime, JobSpec, Site
    from harness.timeutil import stamp

    r = subprocess.run(["scontrol", "create", f"PartitionName={HOLD_PARTITION}", "Nodes=ALL",
                        "State=DOWN", "MaxTime=INFINITE"], capture_output=True, text=True,
                       env=env)
    check(r, "scontrol create partition")
    proj = Project(cfg.work / "slurm-queue", cfg.image_id)
    proj.control("trivial", TRIVIAL)
    camp = proj.campaign("queue", ["trivial"])
    site = Site(harness=HARNESS_BIN, workdir=str(proj.root), runs_dir=str(proj.runs),
                drop=str(proj.root / "drop"), partition=HOLD_PARTITION, gfx="gfx1100")
    night = f"queue-{stamp()}"
    specs = [JobSpec(night=night, campaign_file=str(camp),
                     controls=(ControlTime("trivial", 60, 3),), slot=i, attempt=1)
             for i in range(n)]
    return site, specs


def _submit_both(specs, site, env: dict[str, str], chunk: int) -> tuple[dict, list[str]]:
    """calls.submit of every spec and the bare sbatch of the same argv (another job name),
    chunk by chunk, each side first in turn. Returns per-side seconds and the harness's ids."""
    from harness.slurm import calls, job

    times: dict[str, float] = {"harness": 0.0, "bare": 0.0}
    for spec in specs:  # the bare side's scripts (calls.submit writes its own again)
        path = Path(job.script_path(site, job.token_of(spec)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(job.job_script(spec, site))
    ids: list[str] = []
    bare_ids: list[str] = []
    for c, start in enumerate(range(0, len(specs), chunk)):
        part = specs[start:start + chunk]

        def harness(part=part) -> None:
            for spec in part:
                got = calls.submit(spec, site, env=env)
                if got.kind != "submitted":
                    raise RuntimeError(f"calls.submit: {got.kind}: {got.message}")
                ids.append(got.job_id)

        def bare(part=part) -> None:
            for spec in part:
                argv = job.sbatch_argv(spec, site)
                argv = [a.replace("harness+", "bare+", 1) if a.startswith("--job-name=")
                        else a for a in argv]
                r = subprocess.run(argv, capture_output=True, text=True, env=env)
                check(r, "sbatch")
                bare_ids.append(r.stdout.strip().split(";")[0])

        for name, fn in ((("harness", harness), ("bare", bare)) if c % 2 == 0
                         else (("bare", bare), ("harness", harness))):
            t0 = time.perf_counter()
            fn()
            times[name] += time.perf_counter() - t0
    return times, ids + bare_ids


def run_queue(cfg: Config, env: dict[str, str]) -> dict[str, float]:
    from harness.slurm import calls, job, query

    n = cfg.size(1000, 200)
    site, specs = _queue(cfg, env, n)
    times, ids = _submit_both(specs, site, env, chunk=50)
    tokens = [job.token_of(s) for s in specs]
    found = calls.history(env=env)
    polls, bares = [], []
    try:
        for _ in range(cfg.size(10, 5)):
            t0 = time.perf_counter()
            p = calls.poll(tokens, ids[:n], use_sacct=found.use_sacct, jobcomp=found.jobcomp,
                           env=env)
            polls.append(time.perf_counter() - t0)
            if p.errors or sum(1 for t in tokens if any(
                    j.name == t for j in p.jobs.values())) != n:
                raise RuntimeError(f"poll saw {len(p.jobs)} jobs, errors {p.errors}")
            t0 = time.perf_counter()
            check(subprocess.run(query.squeue_argv(), capture_output=True, env=env), "squeue")
            bares.append(time.perf_counter() - t0)
        pending = sum(1 for j in p.jobs.values() if j.state == query.JobState.PENDING)
        if pending != n:
            cfg.notes.append(f"slurm queue: {pending} of {n} jobs pending, not all")
    finally:
        t0 = time.perf_counter()
        problem = calls.cancel(ids, env=env)
        cancel_s = time.perf_counter() - t0
    if problem:
        cfg.notes.append(f"slurm queue: scancel: {problem}")
    return {
        "slurm_submit_per_s": round(n / times["harness"], 1),
        "slurm_sbatch_per_s": round(n / times["bare"], 1),
        "slurm_submit_ratio": round(times["harness"] / times["bare"], 3),
        "slurm_poll_cycle_s": round(median(polls), 3),
        "slurm_squeue_all_s": round(median(bares), 3),
        "slurm_poll_ratio": round(median(polls) / median(bares), 3),
        "slurm_cancel_s": round(cancel_s, 3),
        "slurm_queued_jobs": n,
    }


# ---- 3. bundle merge + verify of a drop ----------------------------------------------------

def _drop(cfg: Config, work: Path, n: int) -> list[Path]:
    """N per-run bundles, as the jobs of a night leave them in `<drop>/bundles`: copies of
    one real sealed run, each with a log of its own, each exported on its own."""
    from benchmarks.bench_evidence import _copies, _real_run
    from harness.bundle.export import export_bundle

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


# ---- the benchmark ---------------------------------------------------------------------------

def run_slurm(cfg: Config) -> dict[str, float]:
    """All three; the cluster's two are skipped, with a note, where no cluster comes up."""
    where = cfg.work / "slurm-cluster"
    env, why = cluster_up(where, nodes=1, gpus=1)
    out: dict[str, float] = {}
    failed: list[str] = []

    def part(name: str, fn, *args) -> None:
        try:
            out.update(fn(cfg, *args))
        except Exception as e:  # one broken part must not lose the others' figures
            failed.append(f"{name}: {type(e).__name__}: {e}")

    if env is None:
        cfg.notes.append(f"slurm: no private cluster, idle gap and queue figures skipped: {why}")
    else:
        try:
            part("idle gap", run_idle_gap, env)
            part("queue", run_queue, env)
        finally:
            cluster_down(where)
    part("merge", run_merge)
    if failed:
        raise PartFailed("; ".join(failed), out)
    return out


class PartFailed(RuntimeError):
    """Some parts failed; `metrics` holds the figures of the others (run.py keeps them)."""

    def __init__(self, message: str, metrics: dict[str, float]) -> None:
        super().__init__(message)
        self.metrics = metrics

"""The Slurm path (issue 13, issue 15 item 1): GPU idle between controls on one node, the
cost of submitting and polling 1,000 queued jobs, and `bundle merge` + `verify` of the
drop's per-run bundles, each against a baseline measured in the same run.

A private cluster is brought up under the work folder by scripts/slurm-cluster.sh (real
slurmctld and slurmd; one node with one fake GPU, so Slurm itself serialises the jobs on
the GPU; then two GPU slots sharing the host's lock, for `slurm_idle_gap_flock_s`). Where
it cannot be brought up (no root to install Slurm, say) the cluster figures are skipped
with a note in `env.notes`; the merge figure needs no cluster.

- `slurm_idle_gap_*`: the same campaign of trivial controls as one `harness night` on this
  host and as `harness night --executor slurm`, alternating; a gap is container N finished
  → container N+1 started (outcome.json stamps of the sealed runs), as `handoff_s`.
- `slurm_idle_gap_chain_*`, `slurm_idle_gap_prestart_*`: where that gap goes once Slurm
  is off it: one hand-built job running the same controls back to back, and one that
  prestarts each next `harness run` on the host's GPU lock, against the local night.
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
import os
import re
import shlex
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from benchmarks import bench_slurm_merge
from benchmarks.common import (
    REPO,
    Config,
    Project,
    check,
    median,
    parse_time,
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


# Where a Slurm gap goes (job N, then N+1 on the same GPU): (metric, from, to) with marks
# "exit" (container N finished), "done" (slurmctld: job N complete: its seal, export and
# exit are over), "alloc" (slurmctld: N+1 given the node), "launch" (slurmd: launching N+1's
# batch script), "start" (container N+1 started: shell, harness start, preflight, lock,
# docker create + start).
SLURM_SPLIT = (("slurm_gap_end_ms", "exit", "done"),
               ("slurm_gap_sched_ms", "done", "alloc"),
               ("slurm_gap_launch_ms", "alloc", "launch"),
               ("slurm_gap_start_ms", "launch", "start"))
_LOG_MARKS = {
    "done": re.compile(r"^\[([0-9T:.-]+)\] _job_complete: JobId=([0-9]+) done$", re.M),
    "alloc": re.compile(r"^\[([0-9T:.-]+)\] sched(?:/backfill)?: "
                        r"(?:Allocate|_start_job: Started) JobId=([0-9]+) ", re.M),
    "launch": re.compile(r"^\[([0-9T:.-]+)\] Launching batch job ([0-9]+) ", re.M),
}


def log_marks(text: str) -> dict[str, dict[str, float]]:
    """{mark: {job id: epoch seconds}} from slurmctld or slurmd log text (stamps in local
    time, milliseconds), the first line of each kind per job. Pure."""
    out: dict[str, dict[str, float]] = {}
    for mark, pattern in _LOG_MARKS.items():
        found = out.setdefault(mark, {})
        for at, job_id in pattern.findall(text):
            found.setdefault(job_id, datetime.fromisoformat(at).timestamp())
    return out


def slurm_split(ran: list[tuple[tuple[float, float], str]],
                marks: dict[str, dict[str, float]]) -> dict[str, list[float]]:
    """Each consecutive pair's pieces (SLURM_SPLIT), from the (container span, job id) of
    the runs of one node in start order and the logs' marks; a pair with a mark missing
    adds nothing. Pure."""
    split: dict[str, list[float]] = {}
    for (a, job_a), (b, job_b) in itertools.pairwise(ran):
        if job_a == job_b:  # two runs of one job: the handoff is the host lock's, not Slurm's
            continue
        at = {"exit": a[1], "start": b[0], "done": marks.get("done", {}).get(job_a),
              "alloc": marks.get("alloc", {}).get(job_b),
              "launch": marks.get("launch", {}).get(job_b)}
        if all(v is not None for v in at.values()):
            for name, x, y in SLURM_SPLIT:
                split.setdefault(name, []).append(at[y] - at[x])
    return split


def round_ratio(a: list[list[float]], b: list[list[float]]) -> float:
    """Median over rounds of median(a) / median(b) per round: the load of the shared
    machine drifts between rounds, so each ratio pairs the sides of one round. Pure."""
    ratios = [median(x) / median(y) for x, y in zip(a, b, strict=True) if x and y]
    return median(ratios)


# ---- the cluster ----------------------------------------------------------------------------

def cluster_up(where: Path, nodes: int, gpus: int) -> tuple[dict[str, str] | None, str]:
    """The clients' environment for a private cluster, or None and why not."""
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
           ) -> list[tuple[tuple[float, float], dict]]:
    """One night of `camp`: (container span, run.json) of each run that started a
    container, in start order."""
    before = set(proj.run_dirs())
    r = subprocess.run([*HARNESS, "night", str(camp), "--runs-dir", str(proj.runs), "--new",
                        "--json-lines", *extra], capture_output=True, text=True, env=env,
                       cwd=proj.root, timeout=900)
    ran = []
    for d in sorted(set(proj.run_dirs()) - before):
        rec = json.loads((d / "run.json").read_text())
        if rec["status"] != "accepted":
            cfg.notes.append(f"slurm idle gap: {d.name} {rec['status']}: {rec['reasons']}")
        ran += [(span, rec) for span in
                container_spans([json.loads((d / "outcome.json").read_text())])]
    if len(ran) < 2:
        check(r, f"harness night {' '.join(extra)}")
        raise RuntimeError(f"harness night {' '.join(extra)}: {len(ran)} containers ran")
    return sorted(ran, key=lambda x: x[0])


def _cluster_marks(cluster: Path) -> dict[str, dict[str, float]]:
    marks: dict[str, dict[str, float]] = {}
    for log in sorted((cluster / "log").glob("slurm*.log")):
        for mark, found in log_marks(log.read_text(errors="replace")).items():
            marks.setdefault(mark, {}).update(found)
    return marks


def run_idle_gap(cfg: Config, env: dict[str, str], cluster: Path) -> dict[str, float]:
    n, rounds = cfg.size(4, 3), cfg.size(3, 2)
    proj = Project(cfg.work / "slurm-gap", cfg.image_id)
    names = [f"short{i}" for i in range(n)]
    for name in names:
        proj.control(name, TRIVIAL)
    camp = proj.campaign("gap", names)
    drop = ["--drop", str(proj.root / "drop")]
    # "slurm": the night as it runs by default (a slot's next controls in one job, each
    # next run waiting on the host's lock); "slurm_one_per_job": one job per control
    argv = {"local": [], "slurm": ["--executor", "slurm", *drop],
            "slurm_jobs1": ["--executor", "slurm", "--jobs", "1", *drop],
            "slurm_one_per_job": ["--executor", "slurm", "--runs-per-job", "1", *drop]}
    nights: dict[str, list] = {side: [] for side in argv}
    order = list(argv)
    for i in range(rounds):  # each side first in turn
        k = i % len(order)
        for side in order[k:] + order[:k]:
            nights[side].append(_night(cfg, proj, camp, env, argv[side]))
    gaps = {k: [idle_gaps([s for s, _ in ran]) for ran in v] for k, v in nights.items()}
    flat = {k: [g for r in v for g in r] for k, v in gaps.items()}
    locks = {k: [g for ran in v for g in lock_to_start([r for _, r in ran], [s for s, _ in ran])]
             for k, v in nights.items()}
    marks = _cluster_marks(cluster)
    split: dict[str, list[float]] = {}
    for ran in nights["slurm_one_per_job"]:  # Slurm's pieces exist between jobs only
        for name, v in slurm_split([(s, r["slurm"]["job_id"]) for s, r in ran], marks).items():
            split.setdefault(name, []).extend(v)
    out = {
        "slurm_idle_gap_ratio": round(round_ratio(gaps["slurm"], gaps["local"]), 3),
        "slurm_idle_gap_s": round(median(flat["slurm"]), 3),
        "slurm_idle_gap_local_s": round(median(flat["local"]), 3),
        "slurm_idle_gap_jobs1_s": round(median(flat["slurm_jobs1"]), 3),
        "slurm_idle_gap_jobs1_ratio": round(round_ratio(gaps["slurm_jobs1"], gaps["local"]), 3),
        "slurm_idle_gap_one_per_job_s": round(median(flat["slurm_one_per_job"]), 3),
        "slurm_idle_gap_one_per_job_ratio": round(
            round_ratio(gaps["slurm_one_per_job"], gaps["local"]), 3),
        "slurm_idle_gap_max_s": round(max(flat["slurm"]), 3),
        "slurm_lock_to_start_s": round(median(locks["slurm"]), 3),
        "slurm_lock_to_start_local_s": round(median(locks["local"]), 3),
    }
    out.update({name: round(median(v) * 1000, 1) for name, v in split.items()})
    return out


def run_flock_gap(cfg: Config, env: dict[str, str]) -> dict[str, float]:
    """Context: the same Slurm night on a node whose two GPU slots share one host lock
    (the test cluster's shape), so the next job is already started and waits on the flock
    when the last one releases it: Slurm's launch is off the gap. The controls sleep 4 s,
    longer than a job's end + launch + harness start (about 3 s here), else the next job
    would not be at the flock yet and the gap would be Slurm's again."""
    proj = Project(cfg.work / "slurm-flock", cfg.image_id)
    names = [f"sleep{i}" for i in range(cfg.size(4, 3))]
    for name in names:
        proj.control(name, 'command: [python3, -c, "import time; time.sleep(4)"]\n'
                           'timeout: 1m\n')
    camp = proj.campaign("flock", names)
    gaps: list[float] = []
    for _ in range(cfg.size(2, 1)):
        ran = _night(cfg, proj, camp, env, ["--executor", "slurm", "--drop",
                                            str(proj.root / "drop")])
        gaps += idle_gaps([s for s, _ in ran])
    return {"slurm_idle_gap_flock_s": round(median(gaps), 3)}


def chain_script(harness: str, campaign: Path, runs: Path, controls: list[str],
                 depth: int) -> str:
    """A hand-built job that runs `controls` one after another on its one GPU. `depth` 0:
    each `harness run` after the last exits; `depth` k: run i starts once run i-k holds
    the GPU lock, so up to k runs wait on the host's flock (their start and preflight
    done) while one runs. No export into the drop and no stop check: the floor of a job
    that runs a slot's controls in sequence, not a night. Pure."""
    lines = ["#!/bin/sh", f"cd -- {shlex.quote(str(runs.parent))}", "set -u"]
    logs = [shlex.quote(f"{runs.parent}/prestart.{i}") + ".$SLURM_JOB_ID.log"
            for i in range(len(controls))]
    for i, control in enumerate(controls):
        run = shlex.join([harness, "run", str(campaign), "--control", control, "--runs-dir",
                          str(runs), "--json-lines"])
        if not depth:
            lines.append(f"{run} 2>/dev/null")
            continue
        if i >= depth:  # the run k places before holds the lock (or has ended)
            lines.append(f"until grep -q lock-acquired {logs[i - depth]} 2>/dev/null"
                         f" || ! kill -0 \"$p{i - depth}\" 2>/dev/null; do sleep 0.05; done")
        lines += [f"{run} 2>{logs[i]} &", f"p{i}=$!"]
    return "\n".join([*lines, "wait"]) + "\n"


def run_prestart_gap(cfg: Config, env: dict[str, str]) -> dict[str, float]:
    """Context for the Slurm gap: where it goes once Slurm is off it. On the one-GPU node,
    the local night against one job that runs the same controls back to back (Slurm's end,
    scheduling and launch are gone; each control still starts a `harness run`), one that
    keeps the next `harness run` waiting on the host's flock (`prestart`, depth 1) and one
    that starts them all at once (`prestart_all`), alternated."""
    from harness.measure.slurm.job import submit_env

    proj = Project(cfg.work / "slurm-chain", cfg.image_id)
    names = [f"short{i}" for i in range(cfg.size(4, 3))]
    for name in names:
        proj.control(name, TRIVIAL)
    camp = proj.campaign("chain", names)
    proj.runs.mkdir(exist_ok=True)

    def job(depth: int) -> list[tuple[float, float]]:
        script = proj.root / f"chain-{depth}.sh"
        script.write_text(chain_script(HARNESS_BIN, camp, proj.runs, names, depth))
        before = set(proj.run_dirs())
        r = subprocess.run(["sbatch", "--parsable", "--wait", "--gres=gpu:1", "--export=ALL",
                            f"--output={proj.root}/chain-%j.log", str(script)],
                           capture_output=True, text=True, env=submit_env(env), timeout=600)
        check(r, "sbatch --wait of the chain job")
        return container_spans([json.loads((d / "outcome.json").read_text())
                                for d in sorted(set(proj.run_dirs()) - before)])

    sides = {"local": lambda: [s for s, _ in _night(cfg, proj, camp, env, [])],
             "chain": lambda: job(0), "prestart": lambda: job(1),
             "prestart_all": lambda: job(len(names))}
    gaps: dict[str, list[list[float]]] = {side: [] for side in sides}
    order = list(sides)
    for i in range(cfg.size(3, 2)):  # each side first in turn
        for side in order[i % len(order):] + order[: i % len(order)]:
            gaps[side].append(idle_gaps(sides[side]()))
    out = {}
    for side in ("chain", "prestart", "prestart_all"):
        out[f"slurm_idle_gap_{side}_s"] = round(median([g for r in gaps[side] for g in r]), 3)
        out[f"slurm_idle_gap_{side}_ratio"] = round(round_ratio(gaps[side], gaps["local"]), 3)
    out["slurm_idle_gap_chain_local_s"] = round(median([g for r in gaps["local"] for g in r]), 3)
    return out


# ---- 2. submit and poll 1,000 queued jobs ---------------------------------------------------

def _queue(cfg: Config, env: dict[str, str], n: int):
    """A DOWN partition that queues and never starts, and what to submit into it."""
    from harness.base.timeutil import stamp
    from harness.measure.slurm.job import ControlTime, JobSpec, Site

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


def write_scripts(specs, site) -> list[Path]:
    """Each job's script where sbatch expects it, as the harness builds it (no fsync: the
    bare side of the submit figure)."""
    from harness.measure.slurm import job, script

    paths = []
    for spec in specs:
        path = Path(job.script_path(site, job.token_of(spec)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script.job_script(spec, site))
        paths.append(path)
    return paths


def _submit_both(specs, site, env: dict[str, str], chunk: int) -> tuple[dict, list[str]]:
    """calls.submit of every spec and the bare sbatch of the same argv (another job name),
    chunk by chunk, each side first in turn. Returns per-side seconds and the harness's ids."""
    from harness.measure.slurm import calls, job

    times: dict[str, float] = {"harness": 0.0, "bare": 0.0}
    write_scripts(specs, site)  # the bare side's (calls.submit writes its own again)
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
    from harness.measure.slurm import calls, job, query

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


# ---- the benchmark ---------------------------------------------------------------------------

def run_slurm(cfg: Config) -> dict[str, float]:
    """Every part; the cluster's are skipped, with a note, where no cluster comes up."""
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
            part("idle gap", run_idle_gap, env, where)
            part("prestart gap", run_prestart_gap, env)
            env, why = cluster_up(where, nodes=1, gpus=2)  # another shape: restarted
            if env is None:
                failed.append(f"flock gap and queue: no two-GPU cluster: {why}")
            else:
                part("flock gap", run_flock_gap, env)
                part("queue", run_queue, env)
        finally:
            cluster_down(where)
    part("merge", bench_slurm_merge.run_merge)
    if failed:
        raise PartFailed("; ".join(failed), out)
    return out


class PartFailed(RuntimeError):
    """Some parts failed; `metrics` holds the figures of the others (run.py keeps them)."""

    def __init__(self, message: str, metrics: dict[str, float]) -> None:
        super().__init__(message)
        self.metrics = metrics

"""A sixteen-node night: what the controller costs when a night is wide, measured on a real
Slurm cluster of 16 `slurmd` nodes on this machine, so the 100-host night can be projected
from measured rates rather than from a two-node test (docs/slurm.md, "A sixteen-node
night").

A private cluster (scripts/slurm-cluster.sh, 16 nodes x 2 fake GPUs = 32 GPU slots) runs one
`harness night CAMPAIGN --executor slurm` of N trivial controls (`true`; 500, about 12
minutes on 2 cores, or 64 with --quick), exactly as an operator starts it, with whatever
runs per job the executor uses. Each job's HOME is `<home_root>/<node>` and the campaign's
lock is `~/gpu${SLURM_JOB_GPUS}.lock` (expanded in the job), so every GPU slot has its own
lock and the 32 slots really run at once (with the host's one lock a node's two jobs would
take turns, and the night would measure 16 slots). The window is two jobs per slot: a slot
that frees finds the next job already pending in Slurm, so the gap is Slurm's and the next
run's start, not the controller's poll back-off. The controls are distinct: a control's
`repeat:` cannot run as a Slurm job.

- `slurm16_submit_*`: the controller's submits, from its own JSON lines: a job's first
  row's `control-start` → its `slurm-submitted` (the rows' journal commits, the job script
  written durably, sbatch, the job id committed); per job (median), jobs/s and controls/s
  over all; `slurm16_submit_burst_per_s` the first window's jobs over the time they took.
- `slurm16_poll_cycle_s`: the controller's batched query (`calls.poll`: one squeue by the
  tokens in flight, plus the jobcomp file), timed from a side thread every few seconds
  during the night with the jobs then in flight (the machine saturated by the runs), and
  `slurm16_poll_quiet_s` after it with one window of tokens and the whole jobcomp file;
  squeue by one token and by all (`slurm16_squeue_per_token_ms`), and the jobcomp file's
  parse per line, the part of a cycle that grows with the file.
- `slurm16_idle_gap_*`: GPU idle between two controls on one GPU slot (container N ended →
  container N+1 started, from the sealed outcomes, grouped by the slot's lock), with
  `container_spans`/`idle_gaps` of bench_slurm. On 2 cores it measures the CPU 32 slots
  share, not Slurm.
- `slurm16_controller_cpu_*`: user + sys CPU of the `harness night` process with the Slurm
  clients it ran (os.wait4), per control and per job; `slurm16_controller_own_cpu_s`
  without them (its last sample before it exited).
- `slurm100_*`: the 100-host night (2,500 controls, 200 GPU slots) projected from these.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil

from benchmarks.bench_slurm import (
    HARNESS,
    TRIVIAL,
    cluster_down,
    cluster_up,
    container_spans,
    idle_gaps,
)
from benchmarks.common import Config, Project, alternate, median

NODES, GPUS = 16, 2
SLOTS = NODES * GPUS
WINDOW = 2 * SLOTS  # a pending job behind every slot
POLL_EVERY_S = 3.0
NIGHT_TIMEOUT_S = 3600
# The 100-host night the projection is for (docs/slurm.md, "The 100-host case").
CONTROLS_100, SLOTS_100 = 2500, 200


# ---- pure helpers --------------------------------------------------------------------------

def epoch(at: str) -> float:
    """Epoch seconds of a JSON line's `at` (ISO 8601 with a Z). Pure."""
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def submits(lines: list[dict]) -> list[tuple[int, float]]:
    """(controls, seconds) of each job the controller submitted: from the first
    `control-start` of its rows (each row's journal commit) to its `slurm-submitted`
    (script written durably, sbatch, job id committed), in the order the lines came. Pure."""
    out: list[tuple[int, float]] = []
    started, rows = None, 0
    for e in lines:
        if e.get("event") == "control-start":
            started = epoch(e["at"]) if started is None else started
            rows += 1
        elif e.get("event") == "slurm-submitted" and started is not None:
            out.append((len(e.get("controls") or ()) or rows, epoch(e["at"]) - started))
            started, rows = None, 0
    return out


def burst_rate(lines: list[dict], window: int) -> float:
    """Jobs/s of the night's first `window` submits: they go out back to back before any
    outcome, so this is the controller's submit rate with nothing else to do. Pure."""
    starts = [epoch(e["at"]) for e in lines if e.get("event") == "control-start"]
    subs = [epoch(e["at"]) for e in lines if e.get("event") == "slurm-submitted"][:window]
    if len(subs) < 2 or not starts:
        return float("nan")
    return len(subs) / (subs[-1] - starts[0])


def slot_gaps(runs: list[tuple[str, tuple[float, float]]]) -> list[float]:
    """GPU idle between consecutive containers of each slot, from (slot, container span)
    pairs, pooled over slots. Pure."""
    by_slot: dict[str, list[tuple[float, float]]] = {}
    for slot, span in runs:
        by_slot.setdefault(slot, []).append(span)
    return [g for spans in by_slot.values() for g in idle_gaps(spans)]


def quantile(xs: list[float], q: float) -> float:
    """The q-quantile by nearest rank (no interpolation: a gap that happened). Pure."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def projection(m: dict[str, float]) -> dict[str, float]:
    """The 100-host night (2,500 controls, 200 GPU slots) from the rates measured here, at
    the runs per job this night had. Submit: its jobs at the measured seconds per job. One
    poll cycle: squeue by the tokens of a window of two jobs per slot (400), at the cost of
    one token plus the measured cost per further token, and the jobcomp file's parse of one
    line per job of the night. CPU: the controller's per control. Pure."""
    per_job = m["slurm16_runs_per_job"]
    jobs = math.ceil(CONTROLS_100 / per_job)
    flight = min(jobs, 2 * SLOTS_100)
    squeue = m["slurm16_squeue_one_s"] + m["slurm16_squeue_per_token_ms"] / 1000 * (flight - 1)
    parse = m["slurm16_jobcomp_parse_us_per_job"] * 1e-6 * jobs
    return {
        "slurm100_jobs": jobs,
        "slurm100_submit_s": round(jobs * m["slurm16_submit_ms"] / 1000, 1),
        "slurm100_poll_cycle_s": round(squeue + parse, 3),
        "slurm100_controller_cpu_s": round(m["slurm16_controller_cpu_per_control_ms"]
                                           * CONTROLS_100 / 1000, 1),
    }


# ---- the night -------------------------------------------------------------------------------

@dataclass
class Watch:
    """The controller's JSON lines as they come, and polls timed beside it."""

    lines: list[dict] = field(default_factory=list)
    flying: dict[str, str] = field(default_factory=dict)  # job id -> token
    polls: list[tuple[int, float]] = field(default_factory=list)  # (jobs in flight, s)
    loads: list[float] = field(default_factory=list)  # the host's 1-min load average
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, stream) -> None:
        for raw in stream:
            if not raw.startswith("{"):
                continue
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            with self.lock:
                self.lines.append(e)
                if e.get("event") == "slurm-submitted":
                    self.flying[str(e["job_id"])] = e["token"]
                elif e.get("event") == "slurm-end":
                    self.flying.pop(str(e.get("job_id")), None)

    def poll_loop(self, env: dict[str, str], done: threading.Event) -> None:
        """The controller's own poll call, with the jobs in flight now, every few seconds."""
        from harness.measure.slurm import calls

        found = calls.history(env=env)
        while not done.wait(POLL_EVERY_S):
            with self.lock:
                ids, tokens = list(self.flying), list(self.flying.values())
            if not ids:
                continue
            t0 = time.perf_counter()
            p = calls.poll(tokens, ids, use_sacct=found.use_sacct, jobcomp=found.jobcomp,
                           env=env)
            if not p.errors:
                self.polls.append((len(ids), time.perf_counter() - t0))


def _night(proj: Project, camp: Path, env: dict[str, str],
           ) -> tuple[Watch, float, float | None, float, int]:
    """One `harness night`, as an operator runs it: its lines, wall time, its own CPU
    seconds (last sample), CPU seconds with its reaped children (wait4), exit code."""
    controller_home = proj.root / "controller"
    controller_home.mkdir(exist_ok=True)
    argv = [*HARNESS, "night", str(camp), "--executor", "slurm", "--drop",
            str(proj.root / "drop"), "--jobs", str(WINDOW), "--runs-dir", str(proj.runs),
            "--new", "--json-lines"]
    watch, done = Watch(), threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=proj.root,
                            env={**env, "HOME": str(controller_home)})
    reader = threading.Thread(target=watch.read, args=(proc.stderr,), daemon=True)
    poller = threading.Thread(target=watch.poll_loop, args=(env, done), daemon=True)
    reader.start()
    poller.start()
    own, ps = None, psutil.Process(proc.pid)
    deadline = time.monotonic() + NIGHT_TIMEOUT_S
    while True:  # wait4 itself (Popen.poll would reap the child and lose its rusage)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        watch.loads.append(os.getloadavg()[0])
        with contextlib.suppress(psutil.Error):
            t = ps.cpu_times()  # its own share, sampled until it exits
            own = t.user + t.system
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.5)
    wall = time.perf_counter() - t0
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    done.set()
    reader.join(timeout=30)
    poller.join(timeout=60)
    return watch, wall, own, usage.ru_utime + usage.ru_stime, code


def _quiet_polls(cfg: Config, env: dict[str, str], lines: list[dict], cluster: Path,
                 ) -> dict[str, float]:
    """After the night, on the idle cluster: the controller's poll with one window of the
    night's jobs; squeue by one token and by every token of the night (its cost per
    token); the jobcomp file's parse per line."""
    from harness.measure.slurm import calls, query

    jobs = [(e["token"], str(e["job_id"])) for e in lines if e.get("event") == "slurm-submitted"]
    window = jobs[-WINDOW:]
    found = calls.history(env=env)

    def timed(fn) -> float:
        times = []
        for _ in range(cfg.size(10, 5)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return median(times)

    def squeue(tokens: list[str]) -> None:
        subprocess.run(query.squeue_argv(tokens), capture_output=True, env=env, timeout=60)

    def wall_of(fn, *args) -> float:
        t0 = time.perf_counter()
        fn(*args)
        return time.perf_counter() - t0

    poll = timed(lambda: calls.poll([t for t, _ in window], [i for _, i in window],
                                    use_sacct=found.use_sacct, jobcomp=found.jobcomp, env=env))
    squeue([jobs[-1][0]])  # warm: the first call pays for the client's own start
    one, every = (median(x) for x in alternate(cfg.size(10, 5), [
        lambda: wall_of(squeue, [jobs[-1][0]]), lambda: wall_of(squeue, [t for t, _ in jobs])]))
    text = calls.read_jobcomp(found.jobcomp or cluster / "jobcomp.txt")
    count = max(1, text.count("\n"))
    parse = timed(lambda: query.parse_jobcomp(text))
    return {
        "slurm16_poll_quiet_s": round(poll, 4),
        "slurm16_squeue_one_s": round(one, 4),
        "slurm16_squeue_all_s": round(every, 4),
        "slurm16_squeue_per_token_ms": round(max(0.0, every - one) / max(1, len(jobs) - 1)
                                             * 1000, 3),
        "slurm16_jobcomp_lines": count,
        "slurm16_jobcomp_parse_us_per_job": round(parse / count * 1e6, 1),
    }


def run_night(cfg: Config, env: dict[str, str], cluster: Path) -> dict[str, float]:
    n = cfg.size(500, 64)
    proj = Project(cfg.work / "slurm16", cfg.image_id)
    names = [f"t{i}" for i in range(n)]  # distinct controls: a repeat cannot run as a job
    for name in names:
        proj.control(name, TRIVIAL)
    camp = proj.root / "campaigns" / "wide.yaml"
    camp.write_text(
        f"name: wide\nrow: BENCH\nlock: ~/gpu${{SLURM_JOB_GPUS}}.lock\nlock_timeout: 900\n"
        f"stop_policy: continue\ncontrols: {json.dumps(names)}\n"
        f"executor:\n  kind: slurm\n  home_root: {proj.root / 'homes'}\n")
    load0 = os.getloadavg()[0]
    watch, wall, own, cpu, code = _night(proj, camp, env)
    (proj.root / "night.jsonl").write_text("".join(json.dumps(e) + "\n" for e in watch.lines))
    if code not in (0, 1):
        tail = [e for e in watch.lines if e.get("event") not in ("progress", "control-start",
                                                                 "slurm-submitted")][-5:]
        raise RuntimeError(f"harness night exited {code}: {tail}")
    runs, statuses, job_ids = [], {}, set()
    for d in proj.run_dirs():
        rec = json.loads((d / "run.json").read_text())
        statuses[rec["status"]] = statuses.get(rec["status"], 0) + 1
        job_ids.add((rec.get("slurm") or {}).get("job_id"))
        for span in container_spans([json.loads((d / "outcome.json").read_text())]):
            runs.append((rec["lock"]["path"], span))
    if statuses.get("accepted", 0) != n:
        cfg.notes.append(f"slurm16: statuses {statuses} of {n} controls")
    if len(runs) < n // 2:
        raise RuntimeError(f"slurm16: only {len(runs)} of {n} containers ran: {statuses}")
    gaps = slot_gaps(runs)
    first = min(s for _, (s, _) in runs)
    last = max(e for _, (_, e) in runs)
    sent = submits(watch.lines)
    out: dict[str, float] = {
        "slurm16_controls": n,
        "slurm16_jobs": len(sent),
        "slurm16_runs_per_job": round(n / max(1, len(job_ids - {None})), 2),
        "slurm16_slots": len({slot for slot, _ in runs}),
        "slurm16_night_s": round(wall, 1),
        "slurm16_controls_per_min": round(n / wall * 60, 1),
        "slurm16_containers_span_s": round(last - first, 1),
        "slurm16_submit_ms": round(median([s for _, s in sent]) * 1000, 1),
        "slurm16_submit_per_s": round(len(sent) / sum(s for _, s in sent), 1),
        "slurm16_submit_controls_per_s": round(sum(k for k, _ in sent)
                                               / sum(s for _, s in sent), 1),
        "slurm16_submit_burst_per_s": round(burst_rate(watch.lines, WINDOW), 1),
        "slurm16_idle_gap_s": round(median(gaps), 3),
        "slurm16_idle_gap_p90_s": round(quantile(gaps, 0.9), 3),
        "slurm16_idle_gap_max_s": round(max(gaps), 3),
        "slurm16_controller_cpu_s": round(cpu, 2),
        "slurm16_controller_cpu_per_control_ms": round(cpu / n * 1000, 1),
        "slurm16_controller_cpu_per_job_ms": round(cpu / max(1, len(sent)) * 1000, 1),
        "slurm16_controller_cpu_pct": round(cpu / wall * 100, 2),
        "slurm16_load_before": round(load0, 2),
        "slurm16_load_median": round(median(watch.loads), 1),
        "slurm16_load_max": round(max(watch.loads, default=float("nan")), 1),
    }
    if own is not None:
        out["slurm16_controller_own_cpu_s"] = round(own, 2)
    if watch.polls:
        out["slurm16_poll_cycle_s"] = round(median([s for _, s in watch.polls]), 3)
        out["slurm16_poll_cycle_max_s"] = round(max(s for _, s in watch.polls), 3)
        out["slurm16_poll_in_flight"] = round(median([k for k, _ in watch.polls]), 1)
    out.update(_quiet_polls(cfg, env, watch.lines, cluster))
    out.update(projection(out))
    return out


def run_slurm16(cfg: Config) -> dict[str, float]:
    """The sixteen-node night; skipped, with a note, where no cluster comes up."""
    where = cfg.work / "slurm16-cluster"
    t0 = time.perf_counter()
    env, why = cluster_up(where, nodes=NODES, gpus=GPUS)
    if env is None:
        cfg.notes.append(f"slurm16: no private cluster of {NODES} nodes, skipped: {why}")
        return {}
    up_s = time.perf_counter() - t0
    try:
        return {"slurm16_cluster_up_s": round(up_s, 1), **run_night(cfg, env, where)}
    finally:
        cluster_down(where)


"""A container that writes a long log: the harness's memory while it captures, and its
capture throughput against `docker logs -f CID > file` and `docker run … > file`.

All three sides run the same image and command, so dockerd's own cost (json-file driver,
attach copy) falls on each. Throughput is the intended byte count over the wall time
from launch until the last byte is in the file; bytes actually captured are reported
too, because `docker logs` can only return what the log driver kept.
"""

from __future__ import annotations

import json
import subprocess
import time

from benchmarks.common import (
    GB,
    MB,
    Config,
    Project,
    RssPoller,
    check,
    events,
    median,
    parse_time,
    rmtree,
)

LINE = "2026-11-30 08:30:00 INFO engine step=123456 tokens/s=4567.8 kv_cache_usage=0.42 ok"


def _command(size: int) -> str:
    return f"yes '{LINE}' | head -c {size}"


def _harness(proj: Project, camp, notes: list[str]) -> dict:
    before = set(proj.run_dirs())
    t0 = time.perf_counter()
    proc = subprocess.Popen(proj.run_argv(camp), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    poll = RssPoller(proc.pid)
    poll.start()
    out, err = proc.communicate()
    dt = time.perf_counter() - t0
    poll.stop()
    if proc.returncode == 1:  # refused, e.g. SEAL-CHANGED while someone edits the source
        notes.append(f"logs: the harness run was refused: {out.strip()}")
    else:
        check(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), "harness run")
    at = {e["event"]: parse_time(e["at"]) for e in events(err)}
    [run] = sorted(set(proj.run_dirs()) - before)
    outcome = json.loads((run / "outcome.json").read_text())
    rmtree(run)
    capture = at["lock-released"] - at["lock-acquired"]
    return {"capture_s": capture, "wall_s": dt, "bytes": outcome["log_bytes"].get("stdout", 0),
            "seal_s": at["sealed"] - at["lock-released"],
            "rss_peak_mb": poll.peak_mb(), "rss_first_quarter_mb": poll.peak_mb(0, 0.25),
            "rss_last_quarter_mb": poll.peak_mb(0.75, 1.0),
            "tree_pss_mb": poll.peak_mb(column=2), "samples": len(poll.samples)}


def _docker_logs(cfg: Config, size: int) -> dict:
    dest = cfg.work / "docker-logs.log"
    t0 = time.perf_counter()
    r = subprocess.run(["docker", "run", "-d", cfg.image_id, "sh", "-c", _command(size)],
                       capture_output=True, text=True)
    check(r, "docker run -d")
    cid = r.stdout.strip()
    try:
        with open(dest, "wb") as f:
            check(subprocess.run(["docker", "logs", "-f", cid], stdout=f,
                                 stderr=subprocess.PIPE), "docker logs")
        dt = time.perf_counter() - t0
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    n = dest.stat().st_size
    dest.unlink()
    return {"capture_s": dt, "bytes": n}


def _docker_attach(cfg: Config, size: int) -> dict:
    dest = cfg.work / "docker-attach.log"
    t0 = time.perf_counter()
    with open(dest, "wb") as f:
        check(subprocess.run(["docker", "run", "--rm", cfg.image_id, "sh", "-c", _command(size)],
                             stdout=f, stderr=subprocess.PIPE), "docker run > file")
    dt = time.perf_counter() - t0
    n = dest.stat().st_size
    dest.unlink()
    return {"capture_s": dt, "bytes": n}


def run_logs(cfg: Config) -> dict[str, float]:
    size = cfg.size(2 * GB, 100 * MB)
    proj = Project(cfg.work / "logs", cfg.image_id)
    proj.control("flood", f'command: [sh, -c, "{_command(size)}"]\ntimeout: 30m\n'
                 "post_steps: []\n")
    camp = proj.campaign("logs", ["flood"])
    h, d, a = [], [], []
    rounds = 1
    for i in range(rounds):
        sides = [lambda: h.append(_harness(proj, camp, cfg.notes)),
                 lambda: d.append(_docker_logs(cfg, size)),
                 lambda: a.append(_docker_attach(cfg, size))]
        for side in sides[i % 3:] + sides[: i % 3]:
            side()
    th = median([x["capture_s"] for x in h])
    td = median([x["capture_s"] for x in d])
    ta = median([x["capture_s"] for x in a])
    return {
        "log_rss_mb": round(max(x["rss_peak_mb"] for x in h), 1),
        "log_rss_first_quarter_mb": round(max(x["rss_first_quarter_mb"] for x in h), 1),
        "log_rss_last_quarter_mb": round(max(x["rss_last_quarter_mb"] for x in h), 1),
        "log_tree_pss_mb": round(max(x["tree_pss_mb"] for x in h), 1),
        "log_ratio": round(td / th, 3),
        "log_ratio_vs_attach": round(ta / th, 3),
        "log_harness_mb_s": round(size / MB / th, 1),
        "log_docker_logs_mb_s": round(size / MB / td, 1),
        "log_attach_mb_s": round(size / MB / ta, 1),
        "log_harness_bytes_lost": size - min(x["bytes"] for x in h),
        "log_docker_logs_bytes_lost": size - min(x["bytes"] for x in d),
        "log_attach_bytes_lost": size - min(x["bytes"] for x in a),
        "log_seal_s": round(median([x["seal_s"] for x in h]), 2),
        "log_gb": round(size / GB, 2),
    }

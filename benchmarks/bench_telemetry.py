"""The telemetry sampler's own cost, and that it does not slow the control.

- `telemetry_sampler_cpu_pct` (goal < 1): the sampler thread's CPU time (its own
  `thread_time`) over the wall time, sampling a running container's cgroup at 1 Hz, in %
  of one core; `telemetry_sampler_cpu_pct_10hz` the same at 10 Hz (context).
- `telemetry_control_ratio` (context): the wall time of a fixed CPU-bound container with the
  sampler at 10 Hz against the same container without it, alternated round by round.
- `telemetry_busy_cpu_pct` (context, about 100 on an idle host): a one-core busy loop's CPU
  share as the sampler's figures give it (container CPU time over sampled time, as run.json's
  `cpu_pct_mean`). It is the host's load as much as the sampler's: a figure for this
  report, never for a test.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from benchmarks.common import Config, alternate, check, median
from harness.measure.telemetry.cgroup import Cgroup
from harness.measure.telemetry.sampler import Sampler

WORK = "x = 0\nfor i in range({n}): x += i\nprint(x)"


def _container(image: str, *cmd: str) -> str:
    r = subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", image, *cmd],
                       capture_output=True, text=True)
    check(r, "docker run -d")
    return r.stdout.strip()


def _cgroup_lines(cid: str) -> list[str]:
    pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", cid],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(f"/proc/{pid}/cgroup").read_text().splitlines()


def _cost(cfg: Config, interval: float, seconds: float) -> float:
    """% of one core the sampler used over `seconds` at `interval` on a sleeping container."""
    cid = _container(cfg.image_id, "sleep", str(int(seconds) + 30))
    try:
        sampler = Sampler([Cgroup(_cgroup_lines(cid))], cfg.work / f"t-{interval}.jsonl",
                          interval).start()
        time.sleep(seconds)
        done = sampler.stop()
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    return 100 * done.cpu_s / done.seconds


def _timed_work(cfg: Config, n: int, sampled: bool) -> float:
    """Wall time of a fixed amount of CPU work in a container, from start to exit."""
    t0 = time.perf_counter()
    cid = _container(cfg.image_id, "python3", "-c", WORK.format(n=n))
    sampler = None
    if sampled:
        try:
            sampler = Sampler([Cgroup(_cgroup_lines(cid))], cfg.work / f"w-{t0}.jsonl",
                              0.1).start()
        except (OSError, ValueError, subprocess.CalledProcessError):
            sampler = None  # it exited already: nothing to sample
    subprocess.run(["docker", "wait", cid], capture_output=True)
    took = time.perf_counter() - t0
    if sampler is not None:
        sampler.stop()
    return took


def _busy_share(cfg: Config, seconds: float) -> float:
    """% of one core a busy-loop container used, from the first to the last sample."""
    loop = f"import time\nt = time.time()\nwhile time.time() - t < {seconds + 5}: pass"
    cid = _container(cfg.image_id, "python3", "-c", loop)
    out = cfg.work / "busy.jsonl"
    try:
        sampler = Sampler([Cgroup(_cgroup_lines(cid))], out, 0.5).start()
        time.sleep(seconds)
        sampler.stop()
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    points = [(p["t"], p["figures"]["container"]["cpu_s"])
              for p in map(json.loads, out.read_text().splitlines())
              if "cpu_s" in p.get("figures", {}).get("container", {})]
    (t0, c0), (t1, c1) = points[0], points[-1]
    return 100 * (c1 - c0) / (t1 - t0)


def run_telemetry(cfg: Config) -> dict[str, float]:
    seconds = cfg.size(30, 8)
    n = cfg.size(30_000_000, 8_000_000)
    out = {"telemetry_sampler_cpu_pct": round(_cost(cfg, 1.0, seconds), 4),
           "telemetry_sampler_cpu_pct_10hz": round(_cost(cfg, 0.1, seconds / 2), 4)}
    bare, sampled = alternate(cfg.size(5, 2), [lambda: _timed_work(cfg, n, False),
                                               lambda: _timed_work(cfg, n, True)])
    out["telemetry_control_ratio"] = round(median([s / b for s, b in zip(sampled, bare,
                                                                         strict=True)]), 4)
    out["telemetry_control_bare_s"] = round(median(bare), 3)
    out["telemetry_busy_cpu_pct"] = round(_busy_share(cfg, cfg.size(10, 3)), 2)
    return out

"""What a run measures around its container, through real nights on the real Docker engine:
the container's cgroup telemetry sealed with it, and the kernel log from the lock to the
seal (a log file the test appends to, and this machine's real /dev/kmsg, which the tests
read and write as root)."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import threading
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernellog"
# A real amdgpu reset line (tests/fixtures/kernellog/amdgpu-gfx-ring-timeout.dmesg names
# where it was posted).
RESET = next(line for line in (FIXTURES / "amdgpu-gfx-ring-timeout.dmesg").read_text()
             .splitlines() if "GPU reset begin" in line)

BUSY = """\
command:
  - python3
  - -c
  - "import time; b = bytearray(64 << 20); t = time.time()\\nwhile time.time() - t < {s}: pass"
timeout: 1m
telemetry: {{interval: 0.5s, required: true}}
"""
SLEEP = """\
command: [python3, -c, "import time; print('start', flush=True); time.sleep({s})"]
timeout: 1m
"""


def _runs(project) -> list[Path]:
    return [p for p in project.run_dirs() if (p / "run.json").is_file()]


def _when_running(project, control: str, then) -> threading.Thread:
    """Call `then()` once the control's container runs (from a thread): this project's,
    under its own lock, never a namesake another test runs beside it."""
    mine = ["docker", "ps", "-q", "--filter", f"label=org.harness.lock={project.lock}",
            "--filter", f"label=org.harness.control={control}"]

    def watch() -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            if subprocess.run(mine, capture_output=True, text=True).stdout.split():
                time.sleep(0.3)
                then()
                return
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_night_seals_the_containers_cgroup_telemetry(project, cleanup_containers, tmp_path):
    project.control("busy", BUSY.format(s=3))
    camp = project.campaign("telemetry", ["busy"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs), "--no-json-lines")
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = _runs(project)
    rec = project.record(run)
    tele = rec["telemetry"]
    assert rec["status"] == "accepted" and tele["sampled"] and tele["required"]
    lines = [json.loads(x) for x in (run / "telemetry.jsonl").read_text().splitlines()]
    assert len(lines) == tele["samples"] >= 5  # 3 s at 2 Hz
    assert tele["gaps"] == 0 and tele["max_gap_s"] == 0
    container = tele["figures"]["container"]
    assert container["memory_peak_bytes"]["peak"] >= 64 << 20  # the bytearray
    # the shares are figures, read as they come: how large depends on the host's load
    # (benchmarks/bench_telemetry.py measures them on a quiet host, `make bench`)
    assert tele["cpu_pct_mean"] > 0 and tele["sampler_cpu_pct"] >= 0
    assert "telemetry.jsonl" in (run / "SHA256SUMS").read_text()
    check = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=run,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    night = next((project.runs / "nights").iterdir())
    bundle = tmp_path / "night.tar.gz"
    assert project.harness("bundle", "export", str(night), "-o", str(bundle)).returncode == 0
    with tarfile.open(bundle) as tar:
        assert any(n.endswith(f"{run.name}/telemetry.jsonl") for n in tar.getnames())
    assert project.harness("bundle", "verify", str(bundle)).returncode == 0
    os.chmod(run, 0o755)
    (run / "telemetry.jsonl").chmod(0o644)
    with (run / "telemetry.jsonl").open("r+b") as f:  # one changed byte
        f.seek(2)
        f.write(b"X")
    v = project.harness("verify", str(run))
    assert v.returncode == 1 and "telemetry.jsonl" in v.stdout + v.stderr


def test_a_kernel_fault_in_the_window_refuses_that_run_only(project, cleanup_containers):
    kern = project.root / "kern.log"
    kern.write_text(RESET + "\n")  # before the night: outside every window
    project.control("faulted", SLEEP.format(s=3))
    project.control("after", SLEEP.format(s=1))
    camp = project.campaign("kernel", ["faulted", "after"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")

    def reset() -> None:
        with kern.open("a") as f:
            f.write("Dec  3 09:00:01 node1 kernel: " + RESET.split("] ", 1)[1] + "\n")

    watcher = _when_running(project, "faulted", reset)
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs),
                        "--no-json-lines", env={**os.environ, "HARNESS_KERNEL_LOG": str(kern)})
    watcher.join(timeout=5)
    assert r.returncode == 1, r.stdout + r.stderr
    recs = {project.record(p)["control"]["name"]: (p, project.record(p)) for p in _runs(project)}
    run, rec = recs["faulted"]
    assert rec["status"] == "refused" and rec["rules"] == ["KERNEL-LOG-GPU-RESET"]
    assert "GPU reset begin" in rec["reasons"][0]["detail"]
    assert rec["kernel_log"]["kind"] == "file" and rec["kernel_log"]["lines"] == 1
    assert rec["kernel_log"]["gaps"] == [] and rec["kernel_log"]["mark"]["inode"] > 0
    assert (run / "kernel.log").read_text().count("GPU reset begin") == 1
    assert "kernel.log" in (run / "SHA256SUMS").read_text()
    check = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=run,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert recs["after"][1]["status"] == "accepted"
    assert recs["after"][1]["kernel_log"]["lines"] == 0


def test_an_unreadable_kernel_log_is_a_note_unless_required(project, cleanup_containers):
    project.control("noted", SLEEP.format(s=0.2))
    project.control("needs", SLEEP.format(s=0.2) + "kernel_log: {required: true}\n")
    camp = project.campaign("unreadable", ["noted", "needs"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    absent = project.root / "no-such.log"
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs),
                        "--no-json-lines", env={**os.environ, "HARNESS_KERNEL_LOG": str(absent)})
    assert r.returncode == 3, r.stdout + r.stderr  # the host's fault: an environment exit
    recs = {project.record(p)["control"]["name"]: project.record(p) for p in _runs(project)}
    assert recs["noted"]["status"] == "accepted"
    assert recs["noted"]["kernel_log"]["readable"] is False
    assert "no-such.log" in recs["noted"]["kernel_log"]["error"]
    assert recs["needs"]["rules"] == ["ENV-KERNEL-LOG-UNREADABLE"]
    assert "harness doctor" in recs["needs"]["reasons"][0]["detail"]


def test_the_real_kmsg_is_read_over_the_window(project, cleanup_containers):
    """This machine's /dev/kmsg, read (never written: a line a test wrote there would sit in
    the window of every other run on the host) from the run's mark to its seal: the mark is
    the ring's sequence number, the window is read without a gap, and a host whose kernel
    said nothing of a GPU accepts the run. That a process's write can forge no fault is
    shown on records captured from this machine's ring (tests/unit/test_kernel_log_window.py,
    tests/fixtures/kernellog/user-write.kmsg)."""
    assert os.geteuid() == 0, "the kernel-log tier runs as root on this project's machines"
    project.control("real", SLEEP.format(s=1))
    camp = project.campaign("kmsg", ["real"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_KERNEL_LOG"}
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs),
                        "--no-json-lines", env=env)
    (run,) = _runs(project)
    rec = project.record(run)
    block = rec["kernel_log"]
    assert block["kind"] == "kmsg" and block["readable"] and block["mark"]["seq"] >= 0
    assert block["gaps"] == []
    # what the ring said in the window, if anything, is kept and sealed with the run
    assert (run / "kernel.log").is_file() == (block["read"] > 0)
    assert rec["status"] == "accepted" and r.returncode == 0, r.stdout + r.stderr

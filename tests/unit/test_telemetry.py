"""Telemetry: the cgroup source (on this machine's real cgroup v1 lines and a v2 tree laid
out as the kernel does), the sampler's schedule and gaps, and the judge's summary."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from harness.base.catalogue import TELEMETRY_GAP
from harness.judge import samplefigures as judge
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry.cgroup import Cgroup, cpu_value, files_of
from harness.measure.telemetry.sampler import Figures, Gone, Sampler
from harness.measure.telemetry.samples import Point
from harness.measure.telemetry.samples import read as points

CID = "b9e34d255db34a412e8c4aa1f24196494d239a889f191de525109a374280b4b8"
# /proc/<pid>/cgroup of a container on a development machine of this project (Docker
# 20.10, cgroupfs driver, cgroup v1 with the unified hierarchy mounted beside it)
V1_LINES = [f"{n}:{c}:/docker/{CID}" for n, c in (
    (9, "name=systemd"), (8, "pids"), (7, "blkio"), (6, "freezer"), (5, "devices"),
    (4, "memory"), (3, "cpuset"), (2, "cpuacct"), (1, "cpu"), (0, ""))]
V2_LINES = [f"0::/system.slice/docker-{CID}.scope"]


def v1_tree(root: Path, cpu_ns: int = 20218262, now: int = 2166784, peak: int = 3821568) -> None:
    (root / "memory" / "docker" / CID).mkdir(parents=True)
    (root / "cpuacct" / "docker" / CID).mkdir(parents=True)
    (root / "cpuacct" / "cpuacct.usage").write_text("0\n")
    (root / "cpuacct" / "docker" / CID / "cpuacct.usage").write_text(f"{cpu_ns}\n")
    (root / "memory" / "docker" / CID / "memory.usage_in_bytes").write_text(f"{now}\n")
    (root / "memory" / "docker" / CID / "memory.max_usage_in_bytes").write_text(f"{peak}\n")


def test_cgroup_v1_figures_in_their_units(tmp_path: Path) -> None:
    v1_tree(tmp_path)
    figures = Cgroup(V1_LINES, tmp_path).read()["container"]
    assert figures == {q.CPU_S: 0.020218, q.MEMORY_BYTES: 2166784.0,
                       q.MEMORY_PEAK_BYTES: 3821568.0}


def test_cgroup_v2_reads_cpu_stat_and_memory_peak(tmp_path: Path) -> None:
    base = tmp_path / "system.slice" / f"docker-{CID}.scope"
    base.mkdir(parents=True)
    # cpu.stat as cgroup v2 writes it (Documentation/admin-guide/cgroup-v2.rst)
    (base / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n"
                                   "system_usec 500000\n")
    (base / "memory.current").write_text("104857600\n")
    (base / "memory.peak").write_text("209715200\n")
    files = files_of(V2_LINES, tmp_path)
    assert files.v2 and files.cpu == base / "cpu.stat"
    assert Cgroup(V2_LINES, tmp_path).read()["container"] == {
        q.CPU_S: 1.5, q.MEMORY_BYTES: 104857600.0, q.MEMORY_PEAK_BYTES: 209715200.0}


def test_cgroup_gone_and_odd_files(tmp_path: Path) -> None:
    v1_tree(tmp_path)
    src = Cgroup(V1_LINES, tmp_path)
    (tmp_path / "memory" / "docker" / CID / "memory.max_usage_in_bytes").write_text("-1\n")
    assert src.read()["container"][q.MEMORY_PEAK_BYTES] is None  # not a count: no figure
    for f in (tmp_path / "memory" / "docker" / CID).iterdir():
        f.unlink()
    (tmp_path / "cpuacct" / "docker" / CID / "cpuacct.usage").unlink()
    with pytest.raises(Gone):
        src.read()
    assert cpu_value("user_usec 3\n", v2=True) is None
    assert cpu_value("9" * 40, v2=False) is None  # absurd: no figure
    with pytest.raises(ValueError):
        Cgroup(["garbage", "1:memory:/../../etc"], tmp_path)


class Scripted:
    """A test source: figures from a list, then Gone (what the container's cgroup does)."""

    name = "scripted"

    def __init__(self, values: list[float | Exception], delay: float = 0.0) -> None:
        self.values, self.delay = list(values), delay

    def read(self) -> Figures:
        time.sleep(self.delay)
        if not self.values:
            raise Gone("done")
        value = self.values.pop(0)
        if isinstance(value, Exception):
            raise value
        return {"gpu0": {q.POWER_W: value}}


def test_sampler_writes_a_line_per_sample_and_stops_when_gone(tmp_path: Path) -> None:
    path = tmp_path / "telemetry.jsonl"
    sampler = Sampler([Scripted([100.0, 200.0, OSError("busy"), float("nan")])], path, 0.05)
    sampler.start()
    time.sleep(0.5)
    done = sampler.stop()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line.get("figures", {}).get("gpu0", {}).get(q.POWER_W) for line in lines] == [
        100.0, 200.0, None, None]
    assert lines[2]["error"] == "OSError: busy" and "figures" not in lines[2]
    assert (done.samples, done.errors, done.ended) == (3, 1, "gone")
    assert lines[0]["t"] < 0.05  # the first sample at once, then one per 50 ms slot
    assert all(0 < b["t"] - a["t"] < 0.2 for a, b in itertools.pairwise(lines))
    assert 0 <= done.cpu_s < done.seconds


def test_a_slow_source_leaves_a_gap_the_judge_finds(tmp_path: Path) -> None:
    path = tmp_path / "telemetry.jsonl"
    sampler = Sampler([Scripted([1.0] * 3, delay=0.25)], path, 0.05)
    sampler.start()
    time.sleep(1.2)
    done = sampler.stop()
    doc = judge.summarise(points(path), interval=0.05, end=done.seconds)
    assert doc["samples"] == 3 and doc["gaps"] >= 2 and doc["max_gap_s"] >= 0.2
    assert [r.rule for r in judge.refusals(doc, required=True)] == [TELEMETRY_GAP]
    assert judge.refusals(doc, required=False) == []


def test_gaps_count_the_start_and_the_end() -> None:
    assert judge.gaps([0.0, 1.0, 2.0], 1.0, 3.0) == []
    assert judge.gaps([0.0, 1.0, 5.0], 1.0, 5.5) == [(1.0, 5.0)]
    assert judge.gaps([3.0], 1.0, 3.1) == [(0.0, 3.0)]  # started late
    assert judge.gaps([0.0], 1.0, 4.0) == [(0.0, 4.0)]  # stopped early
    assert judge.gaps([], 1.0, 0.5) == []  # a container too short for one interval


def test_summary_peak_mean_energy_phases_and_cpu() -> None:
    pts = [Point(t, 1000.0 + t, {"gpu0": {q.POWER_W: w}, "container": {q.CPU_S: c}})
           for t, w, c in ((0.0, 100.0, 1.0), (1.0, 200.0, 1.5), (2.0, 300.0, 2.5))]
    pts.insert(1, Point(0.5, 1000.5, None))  # a failed read
    doc = judge.summarise(pts, interval=1.0, end=2.0, startup_unix=1001.0)
    power = doc["figures"]["gpu0"][q.POWER_W]
    assert (power["peak"], power["mean"], power["unit"]) == (300.0, 200.0, "W")
    assert power["energy_j"] == 400.0 == doc["energy_j"]  # trapezoid: 150 + 250 J
    assert doc["cpu_pct_mean"] == 75.0  # 1.5 s of CPU over 2 s
    assert (doc["samples"], doc["errors"], doc["gaps"]) == (3, 1, 0)
    assert doc["phases"]["startup"]["gpu0"][q.POWER_W]["peak"] == 200.0
    assert doc["phases"]["generation"]["gpu0"][q.POWER_W]["mean"] == 300.0
    cpu_only = judge.summarise(pts, interval=1.0, end=2.0)
    assert cpu_only["energy_j"] == 400.0 and "phases" not in cpu_only
    assert judge.summarise([], interval=1.0, end=0.0)["energy_j"] is None


def test_required_telemetry_without_a_sample_refuses() -> None:
    assert [r.rule for r in judge.refusals({"samples": 0}, required=True)] == [TELEMETRY_GAP]
    reason = judge.refusals({}, required=True, why="container: no cgroup")[0]
    assert "no cgroup" in reason.detail


def test_hostile_lines_are_failed_reads(tmp_path: Path) -> None:
    path = tmp_path / "telemetry.jsonl"
    path.write_bytes(b'{"t": 0, "unix": 1, "figures": {"c": {"cpu_s": 1}}}\n'
                     b"not json\n[1, 2]\n"
                     b'{"t": NaN, "unix": 1, "figures": {}}\n'
                     b'{"t": 1, "unix": true, "figures": {}}\n'
                     b'{"t": 2, "unix": 3, "figures": {"c": "x", "d": {"cpu_s": 2}}}\n')
    got = list(points(path))
    assert [p.figures is not None for p in got] == [True, False, False, False, False, True]
    assert got[-1].figures == {"d": {"cpu_s": 2}}
    assert list(points(tmp_path / "absent")) == []


def test_a_fifo_a_symlink_or_an_endless_line_is_read_without_hanging(tmp_path: Path) -> None:
    """A sealed folder read anywhere later (a copied runs dir) may hold anything here."""
    import os

    from harness.measure.telemetry.sampler import MAX_LINE

    os.mkfifo(tmp_path / "fifo")
    assert list(points(tmp_path / "fifo")) == []  # no writer: an open() would block
    good = tmp_path / "good.jsonl"
    good.write_bytes(b'{"t": 0, "unix": 1, "figures": {"c": {"cpu_s": 1}}}\n')
    (tmp_path / "link").symlink_to(good)
    assert list(points(tmp_path / "link")) == []
    long = tmp_path / "long.jsonl"
    long.write_bytes(b"x" * (3 * MAX_LINE + 5) + b"\n" + good.read_bytes())
    got = list(points(long))
    assert len(got) == 5 and [p.figures is None for p in got] == [True] * 4 + [False]


def test_the_plan_names_what_it_cannot_sample(tmp_path: Path, monkeypatch) -> None:
    from harness.measure.telemetry import plan

    monkeypatch.setenv("PATH", str(tmp_path))  # no amd-smi anywhere on it
    monkeypatch.setattr("harness.measure.telemetry.amdsmi.default_search_path",
                        lambda: str(tmp_path))
    found, missing = plan.sources(plan.Plan(1.0, "rocm", (0,)), None)
    assert found == []
    assert missing[0].startswith("container: ") and "exited" in missing[0]
    assert missing[1].startswith("gpu: ") and "not found" in missing[1]
    assert plan.gpu_indices("0,2") == (0, 2) and plan.gpu_indices(None) is None


def test_energy_per_token_only_where_both_are_known() -> None:
    from harness.measure.perflog import figures

    run = {"telemetry": {"energy_j": 40.0, "cpu_pct_mean": 80.0,
                         "figures": {"container": {"memory_peak_bytes": {"peak": 1 << 30}}}}}
    got = figures(run, {"metrics": {"generated_tokens": 8}})
    assert got["energy_per_token_j"] == 5.0 and got["memory_peak_bytes"] == 1 << 30
    assert figures(run, {"metrics": {}})["energy_per_token_j"] is None  # tokens unsaid
    assert figures(run, {"metrics": {"generated_tokens": 0}})["energy_per_token_j"] is None
    assert figures(run, {"metrics": {"generated_tokens": -8}})["energy_per_token_j"] is None
    no_power = {"telemetry": {"energy_j": None}}  # the cpu profile: no power figure
    assert figures(no_power, {"metrics": {"generated_tokens": 8}})["energy_per_token_j"] is None


def test_a_true_is_no_figure_in_the_summary_either() -> None:
    """The sampler writes None for a bool; a file with one is read as no value, not 1."""
    pts = [Point(float(t), 1.0 + t, {"c": {q.MEMORY_BYTES: True if t == 1 else 10.0}})
           for t in range(3)]
    mem = judge.summarise(pts, interval=1.0, end=2.0)["figures"]["c"][q.MEMORY_BYTES]
    assert mem["samples"] == 2 and mem["mean"] == 10.0

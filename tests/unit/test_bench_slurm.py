"""The pure helpers behind `make bench`'s Slurm idle gap: from the stamps the sealed runs
record (outcome.json, run.json) to gaps and per-round ratios."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

from benchmarks.bench_slurm import (
    chain_script,
    container_spans,
    idle_gaps,
    lock_to_start,
    log_marks,
    round_ratio,
    slurm_split,
    write_scripts,
)


def _outcome(start: str | None, end: str | None) -> dict:
    return {"container_started_at": start, "container_finished_at": end}


def test_spans_are_in_start_order_and_a_run_without_a_container_is_left_out() -> None:
    outcomes = [_outcome("2026-12-01T02:00:05.500000000Z", "2026-12-01T02:00:06Z"),
                _outcome(None, None),  # refused before launch: no container
                _outcome("2026-12-01T02:00:01.25Z", "2026-12-01T02:00:02.75Z")]
    spans = container_spans(outcomes)
    assert [round(b - a, 6) for a, b in spans] == [1.5, 0.5]
    assert spans[0][0] < spans[1][0]


def test_gaps_are_each_start_minus_the_previous_finish_whatever_the_input_order() -> None:
    assert idle_gaps([(10.0, 12.0), (0.0, 2.0), (2.5, 9.0)]) == [0.5, 1.0]
    assert idle_gaps([(0.0, 1.0)]) == []


def test_lock_to_start_pairs_each_release_with_the_next_container() -> None:
    records = [{"lock": {"released": "2026-12-01T02:00:02Z"}},
               {"lock": {"released": "2026-12-01T02:00:09Z"}}]
    spans = container_spans([_outcome("2026-12-01T02:00:01Z", "2026-12-01T02:00:01.900Z"),
                             _outcome("2026-12-01T02:00:03.25Z", "2026-12-01T02:00:08Z")])
    assert lock_to_start(records, spans) == [1.25]


def test_round_ratio_pairs_the_sides_of_one_round_and_skips_empty_rounds() -> None:
    # Round medians 2/1 and 6/2: the ratio of the pooled medians (4/1.5) would differ.
    assert round_ratio([[2.0], [6.0], []], [[1.0], [2.0], [5.0]]) == 2.5
    assert math.isnan(round_ratio([[]], [[1.0]]))


CTLD = """\
[2026-12-01T13:16:45.134] sched: Allocate JobId=1 NodeList=node1 #CPUs=1 Partition=debug
[2026-12-01T13:16:46.627] _job_complete: JobId=1 WEXITSTATUS 0
[2026-12-01T13:16:46.627] _job_complete: JobId=1 done
[2026-12-01T13:16:47.138] sched: Allocate JobId=2 NodeList=node1 #CPUs=1 Partition=debug
[2026-12-01T13:16:47.500] sched/backfill: _start_job: Started JobId=3 in debug on node1
[2026-12-01T13:16:48.000] _job_complete: JobId=2 done
"""
SLURMD = "[2026-12-01T13:16:48.315] Launching batch job 2 for UID 0\n"


def _t(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()  # Slurm logs local time


def test_log_marks_reads_completion_allocation_and_launch_per_job() -> None:
    marks = log_marks(CTLD + SLURMD)
    assert marks["done"] == {"1": _t("2026-12-01T13:16:46.627"),
                             "2": _t("2026-12-01T13:16:48.000")}  # not WEXITSTATUS lines
    assert marks["alloc"] == {"1": _t("2026-12-01T13:16:45.134"),
                              "2": _t("2026-12-01T13:16:47.138"),
                              "3": _t("2026-12-01T13:16:47.500")}
    assert marks["launch"] == {"2": _t("2026-12-01T13:16:48.315")}
    assert log_marks("garbage\n[not a time] _job_complete: JobId=9 done\n")["done"] == {}


def test_slurm_split_divides_each_gap_into_its_pieces_and_skips_unmarked_pairs() -> None:
    marks = log_marks(CTLD + SLURMD)
    exit1, start2 = _t("2026-12-01T13:16:46.200"), _t("2026-12-01T13:16:49.100")
    ran = [((exit1 - 1, exit1), "1"), ((start2, start2 + 0.3), "2"),
           ((start2 + 5, start2 + 6), "3")]  # job 3 never launched per the logs: no pieces
    split = slurm_split(ran, marks)
    assert {k: [round(x, 3) for x in v] for k, v in split.items()} == {
        "slurm_gap_end_ms": [0.427], "slurm_gap_sched_ms": [0.511],
        "slurm_gap_launch_ms": [1.177], "slurm_gap_start_ms": [0.785]}
    assert round(sum(v[0] for v in split.values()), 3) == round(start2 - exit1, 3)


def test_the_bare_side_writes_each_jobs_script_as_the_harness_builds_it(tmp_path) -> None:
    """The submit figure's bare side writes the harness's own scripts (a merge once left
    it calling a builder that had moved, and only `make bench` found it)."""
    from harness.measure.slurm import job, script
    from harness.measure.slurm.job import ControlTime, JobSpec, Site

    site = Site(harness="/opt/h/bin/harness", workdir=str(tmp_path), runs_dir="runs",
                drop=str(tmp_path / "drop"), partition="benchhold", gfx="gfx1100")
    specs = [JobSpec(night="queue-20261201T000000Z", campaign_file="c.yaml",
                     controls=(ControlTime("trivial", 60, 3),), slot=i, attempt=1)
             for i in range(3)]
    paths = write_scripts(specs, site)
    assert [p.name for p in paths] == [
        Path(job.script_path(site, job.token_of(s))).name for s in specs]
    assert [p.read_text() for p in paths] == [script.job_script(s, site) for s in specs]


def test_a_prestart_chain_starts_each_run_once_the_one_k_before_holds_the_lock(tmp_path,
                                                                             ) -> None:
    runs = tmp_path / "runs"
    seq = chain_script("/h/harness", tmp_path / "c.yaml", runs, ["a", "b", "c"], depth=0)
    assert seq.count(" run ") == 3 and "&" not in seq.replace("2>/dev/null", "")
    lines = chain_script("/h/harness", tmp_path / "c.yaml", runs, ["a", "b", "c"],
                         depth=2).splitlines()
    at = {c: next(i for i, line in enumerate(lines) if f"--control {c}" in line)
          for c in "abc"}
    assert lines[at["a"]].endswith("&") and lines[at["b"]].endswith("&")
    assert at["b"] == at["a"] + 2  # b does not wait: two may wait on the flock
    assert "until grep -q lock-acquired" in lines[at["c"] - 1]
    assert "prestart.0." in lines[at["c"] - 1] and '"$p0"' in lines[at["c"] - 1]
    assert lines[-1] == "wait"

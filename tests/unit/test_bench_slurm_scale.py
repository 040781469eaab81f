"""The pure helpers behind `make bench`'s sixteen-node night: the controller's submit times
from its JSON lines, the idle gaps per GPU slot, and the 100-host projection."""

from __future__ import annotations

import math

import pytest

from benchmarks.bench_slurm_scale import burst_rate, projection, quantile, slot_gaps, submits


def _line(event: str, second: float, **kw) -> dict:
    return {"event": event, "at": f"2026-12-06T18:00:{second:09.6f}Z", **kw}


LINES = [
    _line("night-start", 0.0),
    # one job of two controls: both rows committed, then one sbatch
    _line("control-start", 1.0), _line("control-start", 1.1),
    _line("slurm-submitted", 1.25, job_id="7", controls=["a", "b"]),
    _line("progress", 1.3),
    # one job of one control
    _line("control-start", 2.0), _line("slurm-submitted", 2.5, job_id="8", controls=["c"]),
]


def test_a_jobs_submit_runs_from_its_first_rows_commit_to_its_job_id() -> None:
    got = submits(LINES)
    assert [k for k, _ in got] == [2, 1]
    assert [round(s, 6) for _, s in got] == [0.25, 0.5]


def test_the_burst_rate_counts_the_first_window_of_jobs_from_the_first_row() -> None:
    assert burst_rate(LINES, 2) == pytest.approx(2 / 1.5)
    assert math.isnan(burst_rate(LINES, 1))  # one job is no rate


def test_gaps_are_taken_within_each_slot_never_across_slots() -> None:
    runs = [("n1/gpu0", (0.0, 1.0)), ("n1/gpu1", (0.5, 3.0)), ("n1/gpu0", (1.5, 2.0)),
            ("n1/gpu1", (5.0, 6.0))]
    assert sorted(slot_gaps(runs)) == [0.5, 2.0]


def test_the_quantile_is_a_gap_that_happened() -> None:
    assert quantile([3.0, 1.0, 2.0, 10.0], 0.9) == 10.0
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert math.isnan(quantile([], 0.5))


def test_the_projection_scales_jobs_by_the_runs_each_job_carried() -> None:
    measured = {"slurm16_runs_per_job": 4.0, "slurm16_submit_ms": 100.0,
                "slurm16_squeue_one_s": 0.01, "slurm16_squeue_per_token_ms": 0.1,
                "slurm16_jobcomp_parse_us_per_job": 50.0,
                "slurm16_controller_cpu_per_control_ms": 20.0}
    got = projection(measured)
    assert got["slurm100_jobs"] == 625  # 2,500 controls, four a job
    assert got["slurm100_submit_s"] == 62.5
    # a window of two jobs per slot (400 tokens), and one jobcomp line per job
    assert got["slurm100_poll_cycle_s"] == round(0.01 + 0.0001 * 399 + 50e-6 * 625, 3)
    assert got["slurm100_controller_cpu_s"] == 50.0

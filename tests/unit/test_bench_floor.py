"""The bench's derived start figures: the harness's own share above its library floor."""

from __future__ import annotations

from benchmarks.run import GOALS, above_floor


def test_share_is_the_figure_minus_its_floor() -> None:
    got = above_floor({"cli_check_ms": 225.6, "cli_floor_check_ms": 131.6,
                       "run_overhead_ms": 391.0, "cli_floor_run_ms": 293.1})
    assert got == {"cli_check_above_floor_ms": 94.0, "run_overhead_above_floor_ms": 97.9}
    reads = above_floor({"cli_status_ms": 105.1, "cli_show_ms": 98.6, "cli_floor_read_ms": 40.0})
    assert reads == {"cli_status_above_floor_ms": 65.1, "cli_show_above_floor_ms": 58.6}


def test_a_figure_whose_part_did_not_run_is_left_out() -> None:
    assert above_floor({"cli_check_ms": 200.0}) == {}
    assert above_floor({"run_overhead_ms": 300.0, "cli_floor_check_ms": 100.0}) == {}


def test_one_shot_start_is_context_not_a_goal() -> None:
    for name in ("run_overhead_ms", "cli_check_ms", "run_overhead_above_floor_ms",
                 "cli_check_above_floor_ms", "cli_status_ms", "cli_show_ms",
                 "cli_status_above_floor_ms", "cli_show_above_floor_ms"):
        assert GOALS[name][1] is None, name
    assert GOALS["cli_help_ms"][1] is not None

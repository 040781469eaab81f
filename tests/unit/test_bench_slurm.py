"""The pure helpers behind `make bench`'s Slurm idle gap: from the stamps the sealed runs
record (outcome.json, run.json) to gaps and per-round ratios."""

from __future__ import annotations

import math

from benchmarks.bench_slurm import container_spans, idle_gaps, lock_to_start, round_ratio


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

"""The regression call (harness/judge/regression.py): the exact rank test against brute
force, the guards (baseline size, effect floor, hostile values), and the two rates that
matter to a night owner, measured on generated series: how often noise alone is called
(false positives) and how soon a real step is (detection within two nights)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from harness.judge.regression import (
    MIN_BASELINE,
    Movement,
    Worse,
    _u_counts,
    call,
    p_higher,
    u_statistic,
)

SERIES = 2000  # generated series per rate: the rates below are read off this many


def brute_p(recent: list[float], baseline: list[float]) -> float:
    """P(U >= u) by relabelling every way the pooled values could split (distinct values)."""
    pooled = recent + baseline
    u = u_statistic(recent, baseline)
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(recent)):
        r = [pooled[i] for i in chosen]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        total += 1
        hits += u_statistic(r, b) >= u
    return hits / total


def tie_breakings(recent: list[float], baseline: list[float]):
    """Every way to order tied values: each value nudged by its place in a permutation."""
    values = recent + baseline
    for order in itertools.permutations(range(len(values))):
        nudged = [v + order[i] * 1e-6 for i, v in enumerate(values)]
        yield nudged[:len(recent)], nudged[len(recent):]


@pytest.mark.parametrize(("m", "n"), [(1, 1), (1, 9), (2, 9), (3, 5), (4, 4), (10, 12)])
def test_the_u_table_counts_every_ordering_once_and_is_symmetric(m, n) -> None:
    counts = _u_counts(m, n)
    assert len(counts) == m * n + 1 and sum(counts) == math.comb(m + n, m)
    assert counts == counts[::-1]  # U and m*n - U are equally likely


def test_the_exact_p_value_is_the_brute_force_one() -> None:
    rng = random.Random(7)
    for _ in range(60):
        m, n = rng.randint(1, 3), rng.randint(3, 7)
        values = rng.sample(range(100), m + n)  # distinct
        recent, baseline = [float(v) for v in values[:m]], [float(v) for v in values[m:]]
        assert p_higher(recent, baseline) == pytest.approx(brute_p(recent, baseline))


def test_with_ties_the_p_value_is_that_of_the_least_favourable_tie_breaking() -> None:
    """Tied figures (rounded durations) could have come in any order: the p-value taken is
    the largest any order gives, so a tie never helps a call."""
    rng = random.Random(8)
    for _ in range(40):
        m, n = rng.randint(1, 2), rng.randint(2, 4)
        values = [float(rng.randint(0, 3)) for _ in range(m + n)]  # many ties
        recent, baseline = values[:m], values[m:]
        worst = max(brute_p(r, b) for r, b in tie_breakings(recent, baseline))
        assert p_higher(recent, baseline) == pytest.approx(worst), (recent, baseline)


def test_two_runs_above_nine_earlier_ones_is_the_smallest_p_the_test_can_give() -> None:
    assert p_higher([20, 21], list(range(9))) == pytest.approx(1 / 55)
    assert p_higher([-1, -2], list(range(9))) == 1.0


def test_below_the_minimum_baseline_it_never_calls() -> None:
    got = call([500.0, 510.0], [100.0] * (MIN_BASELINE - 1), Worse.HIGHER)
    assert got.movement == Movement.INSUFFICIENT and got.p_value is None
    assert got.why == f"{MIN_BASELINE - 1} earlier runs, {MIN_BASELINE} needed before a call"
    assert call([], [100.0] * 20, Worse.HIGHER).movement == Movement.INSUFFICIENT


def test_values_that_are_not_finite_numbers_are_not_counted() -> None:
    """The figures come from perflog rows, which a run folder's files fed: hostile."""
    baseline = [100.0] * 8 + [math.nan, math.inf, True, "100", None]
    got = call([150.0, 151.0], baseline, Worse.HIGHER)
    assert got.movement == Movement.INSUFFICIENT and got.baseline == 8


BASE = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9]


@pytest.mark.parametrize(("recent", "worse", "movement"), [
    ([120.0, 121.0], Worse.HIGHER, Movement.REGRESSION),  # a duration grew
    ([120.0, 121.0], Worse.LOWER, Movement.IMPROVEMENT),  # a throughput grew
    ([80.0, 81.0], Worse.LOWER, Movement.REGRESSION),  # a throughput fell
    ([80.0, 81.0], Worse.HIGHER, Movement.IMPROVEMENT),  # a duration fell
    ([100.0, 100.3], Worse.HIGHER, Movement.NO_CHANGE),
])
def test_the_direction_decides_regression_or_improvement(recent, worse, movement) -> None:
    got = call(recent, BASE, worse)
    assert got.movement == movement, got
    if movement != Movement.NO_CHANGE:
        assert got.p_value == pytest.approx(1 / 55) and abs(got.shift) >= 0.19


def test_a_steady_shift_smaller_than_the_effect_floor_is_no_change() -> None:
    """Both recent runs above every earlier one (p = 1/55), but by 1%: not worth a page."""
    got = call([101.2, 101.3], BASE, Worse.HIGHER)
    assert got.movement == Movement.NO_CHANGE and got.p_value == pytest.approx(1 / 55)
    assert "smaller than the 5% that counts" in got.why
    assert call([101.2, 101.3], BASE, Worse.HIGHER, min_effect=0.01).movement == (
        Movement.REGRESSION)


def test_one_wild_run_moves_a_rank_not_the_call() -> None:
    got = call([100.1, 10_000.0], BASE, Worse.HIGHER)
    assert got.movement == Movement.NO_CHANGE, got  # one outlier is not a step


def nights(rng: random.Random, before: int, after: int, step: float,
           noise) -> list[float]:
    return ([noise(rng, 100.0) for _ in range(before)]
            + [noise(rng, 100.0 * (1 + step)) for _ in range(after)])


def gaussian(rng: random.Random, centre: float) -> float:
    return rng.gauss(centre, 0.03 * centre)  # 3% noise, as a night's durations show


def heavy(rng: random.Random, centre: float) -> float:
    """Mostly 2% noise, one run in ten 30% slow (a neighbour's job, a cold cache)."""
    slow = 1.3 if rng.random() < 0.1 else 1.0
    return rng.gauss(centre, 0.02 * centre) * slow


def walk(series: list[float], first: int) -> list[Movement]:
    """Each night from `first` on: its run and the night before's against all earlier."""
    return [call(series[i - 1:i + 1], series[:i - 1], Worse.HIGHER).movement
            for i in range(first, len(series))]


@pytest.mark.parametrize(("noise", "bound"), [(gaussian, 0.03), (heavy, 0.05)])
def test_noise_alone_is_rarely_called(noise, bound) -> None:
    """Null series (no step): calls of either kind, one night each after a baseline of
    MIN_BASELINE, over SERIES series. Measured (seeded): 1.9% for 3% gaussian noise, 2.75%
    for the heavy-tailed noise (two slow runs in a row look like a step to any test that
    sees two runs). The confirmation rerun (issue 25, part 4) is what brings a page's
    false-positive rate below these: a call is shown only when its rerun confirms it."""
    rng = random.Random(2026)
    calls = sum(walk(nights(rng, MIN_BASELINE + 2, 0, 0.0, noise), MIN_BASELINE + 1)
                != [Movement.NO_CHANGE] for _ in range(SERIES))
    assert calls / SERIES < bound, calls / SERIES


@pytest.mark.parametrize(("noise", "step"), [(gaussian, 0.15), (heavy, 0.4)])
def test_a_step_is_called_within_two_nights(noise, step) -> None:
    """A slowdown from one night on, beyond the noise's own band: called a regression on
    the first or the second night after it, never an improvement. Measured (seeded): 100%
    for a 15% step in 3% gaussian noise; 99.95% for a 40% step in the heavy-tailed noise,
    whose routine slow runs are 30% slow. A 15% step inside that band is called within two
    nights only 47% of the time at the minimum baseline (86% with 30 earlier nights): two
    runs cannot tell it from the routine slow ones, which is what the rerun is for."""
    rng = random.Random(11)
    called = 0
    for _ in range(SERIES):
        series = nights(rng, MIN_BASELINE + 1, 2, step, noise)
        seen = walk(series, MIN_BASELINE + 1)  # the step night, then the next
        assert Movement.IMPROVEMENT not in seen
        called += Movement.REGRESSION in seen
    assert called / SERIES >= 0.99, called / SERIES

"""How often a night pages, measured on generated series: the night's procedure as
harness.driver.night.confirm runs it (the run alone against every earlier run; on a
regression, one rerun, and a page only when the run and its rerun together are a
regression too), over null series (noise, no step) and step series (a slowdown from one
night on). The rates stated here are the ones docs/regressions.md quotes."""

from __future__ import annotations

import random

import pytest

from harness.judge.comparable import Confirmation, confirmation
from harness.judge.regression import MAX_BASELINE, Movement, Worse, call

SERIES = 2000
FIRST = 19  # earlier runs before the first night that can page: p = 1/20 for a run alone


def gaussian(rng: random.Random, centre: float) -> float:
    return rng.gauss(centre, 0.03 * centre)  # 3% noise, as a night's durations show


def heavy(rng: random.Random, centre: float) -> float:
    """Mostly 2% noise, one run in ten 30% slow (a neighbour's job, a cold cache)."""
    return rng.gauss(centre, 0.02 * centre) * (1.3 if rng.random() < 0.1 else 1.0)


def one_night(rng: random.Random, noise, centre: float, earlier: list[float]) -> bool:
    """A night of one control: its run is called alone; a regression gets its rerun, and
    the night pages only when the pair and the rerun alone are called regressions too.
    Every run it made joins the earlier runs (all accepted: a call refuses nothing)."""
    baseline = earlier[-MAX_BASELINE:]
    run = noise(rng, centre)
    alone = call([run], baseline, Worse.HIGHER).movement
    earlier.append(run)
    if alone != Movement.REGRESSION:
        return False
    rerun = noise(rng, centre)
    earlier.append(rerun)
    pair = call([run, rerun], baseline, Worse.HIGHER).movement
    again = call([rerun], baseline, Worse.HIGHER).movement
    return confirmation(alone, pair, again) == Confirmation.CONFIRMED


def pages(noise, step: float, nights: int, seed: int) -> float:
    """The share of series that page on one of `nights` nights after FIRST earlier runs,
    the runs of those nights `step` slower."""
    rng = random.Random(seed)
    paged = 0
    for _ in range(SERIES):
        earlier = [noise(rng, 100.0) for _ in range(FIRST)]
        paged += any(one_night(rng, noise, 100.0 * (1 + step), earlier)
                     for _ in range(nights))
    return paged / SERIES


@pytest.mark.parametrize(("noise", "bound"), [(gaussian, 0.015), (heavy, 0.025)])
def test_noise_alone_rarely_pages(noise, bound) -> None:
    """Null series, one night after the 19 earlier runs. Measured (seeded): 0.55% of
    nights page for 3% gaussian noise, 0.25% for the heavy-tailed noise; the run alone is
    called a regression in about 3.5% and 4% of them (at most 1/20 by construction), so
    the rerun removes about six calls in seven, and fifteen in sixteen, before anyone is
    paged."""
    assert pages(noise, 0.0, 1, seed=2026) < bound


@pytest.mark.parametrize(("noise", "step"), [(gaussian, 0.15), (heavy, 0.4)])
def test_a_step_pages_within_two_nights(noise, step) -> None:
    """Measured (seeded): a 15% step in 3% gaussian noise pages on its first or second
    night in 99.4% of series (98.55% on the first); a 40% step in the heavy-tailed noise
    in 99.3% (98.8% on the first). A night whose call the rerun did not confirm leaves
    both slow runs in the baseline, which is what the second night misses on. A step
    inside the heavy noise's own band (15%) pages within two nights in only 14% of
    series: two runs cannot tell it from the routine slow ones."""
    assert pages(noise, step, 2, seed=11) >= 0.99


def one_off(rng: random.Random, noise, pair_only: bool) -> bool:
    """One run far slower than any (a neighbour's job), its rerun normal: paged?"""
    baseline = [noise(rng, 100.0) for _ in range(FIRST)]
    run, rerun = 300.0, noise(rng, 100.0)
    alone = call([run], baseline, Worse.HIGHER).movement
    pair = call([run, rerun], baseline, Worse.HIGHER).movement
    again = Movement.REGRESSION if pair_only else call([rerun], baseline, Worse.HIGHER).movement
    return confirmation(alone, pair, again) == Confirmation.CONFIRMED


@pytest.mark.parametrize("noise", [gaussian, heavy])
def test_a_one_off_rarely_pages_where_the_pair_alone_would_page_one_night_in_four(noise):
    """The rule the rerun is judged by. Measured (seeded): with the pair's call alone a
    one-off pages in about 25% of nights (a normal rerun in the baseline's top fifth is
    enough next to an extreme run); with the rerun alone called too, in about 5%
    (the rerun beyond every earlier run: 1/20 by construction)."""
    rng = random.Random(5)
    pair_only = sum(one_off(rng, noise, True) for _ in range(SERIES)) / SERIES
    rng = random.Random(5)
    both = sum(one_off(rng, noise, False) for _ in range(SERIES)) / SERIES
    assert pair_only > 0.15 and both < 0.07, (pair_only, both)

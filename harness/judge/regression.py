"""Whether a control's figure moved: a regression called with statistics, never by eye. Pure.

As google/benchmark's compare.py and asv do: a one-sided Mann-Whitney U rank test (one wild
run moves a rank by one, not the mean by a lot), an effect floor on the median's move, and
a minimum baseline below which the answer is "insufficient data", never a call.
With two recent runs against nine earlier the smallest p is 1/55, so alpha 0.05 is reached
only when both lie beyond all earlier runs but one: a step is called within two nights."""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

ALPHA = 0.05
MIN_BASELINE = 9  # compare.py asks for at least 9 repetitions before it calls anything
MIN_EFFECT = 0.05  # the median must move by 5% of the baseline's too
MAX_RECENT = 10  # recent runs compared (the newest): the exact table stays small
MAX_BASELINE = 200  # earlier runs compared (the newest)
# A figure that is another's sum with more moves whenever that one does (the GPU lock is
# held for the whole container run, and a little more): called once, as its cause's.
MOVES_WITH = {"lock_hold_s": "duration_s"}


class Movement(enum.StrEnum):
    """What a figure did, as the morning report says it."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no change"
    INSUFFICIENT = "insufficient data"


class Worse(enum.StrEnum):
    """Which way a figure gets worse: a duration when it grows, a throughput when it falls."""

    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Call:
    """The call over one figure, with what it rests on (kept in the sealed addendum)."""

    movement: Movement
    baseline: int  # how many earlier runs it was compared with
    recent: int  # how many recent runs
    p_value: float | None  # one-sided, in the direction that was called (or the smaller)
    shift: float | None  # median(recent) / median(baseline) - 1
    why: str

    def doc(self) -> dict:
        return {"movement": str(self.movement), "baseline": self.baseline,
                "recent": self.recent, "p_value": self.p_value, "shift": self.shift,
                "why": self.why}


@lru_cache(maxsize=64)
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings of m recent and n earlier runs give each value of U (the
    pairs where a recent run is above an earlier one), U = 0 .."""
    row = [(1,)] * (n + 1)  # i = 0 recent runs: U is 0 whatever j
    for i in range(1, m + 1):
        new = [(1,)]  # j = 0 earlier runs: U is 0
        for j in range(1, n + 1):
            out = [0] * (i * j + 1)
            for u, count in enumerate(row[j]):  # the largest is recent: + j
                out[u + j] += count
            for u, count in enumerate(new[j - 1]):  # the largest is earlier: + 0
                out[u] += count
            new.append(tuple(out))
        row = new
    return row[n]


def u_statistic(recent: Sequence[float], baseline: Sequence[float]) -> int:
    """Pure: pairs (recent, earlier) with the recent run strictly higher. A tie counts for
    nothing: its true order is unknown, so the order least favourable to the call is taken."""
    return sum(1 for r in recent for b in baseline if r > b)


def p_higher(recent: Sequence[float], baseline: Sequence[float]) -> float:
    """Pure: the exact one-sided p-value that the recent runs are higher than chance puts them: P(U
    >= u) over every ordering of distinct values. With ties, that of the tie-breaking least
    favourable to the call, so ties never make a figure look moved."""
    m, n = len(recent), len(baseline)
    counts = _u_counts(m, n)
    return sum(counts[u_statistic(recent, baseline):]) / math.comb(m + n, m)


def call(recent: Sequence[float], baseline: Sequence[float], worse: Worse, *,
         min_effect: float = MIN_EFFECT) -> Call:
    """Pure: did the figure move between `baseline` and `recent`?"""
    recent = [float(v) for v in recent if _finite(v)][-MAX_RECENT:]
    baseline = [float(v) for v in baseline if _finite(v)][-MAX_BASELINE:]
    if not recent or len(baseline) < MIN_BASELINE:
        return Call(Movement.INSUFFICIENT, len(baseline), len(recent), None, None,
                    f"{len(baseline)} earlier runs, {MIN_BASELINE} needed before a call")
    before, now = statistics.median(baseline), statistics.median(recent)
    shift = (now / before - 1.0) if before else None
    up, down = p_higher(recent, baseline), p_higher([-v for v in recent],
                                                    [-v for v in baseline])
    grew = up <= ALPHA and (shift is None or shift >= min_effect)
    fell = down <= ALPHA and (shift is None or shift <= -min_effect)
    if grew or fell:
        worse_way = grew == (worse == Worse.HIGHER)
        movement = Movement.REGRESSION if worse_way else Movement.IMPROVEMENT
        p = up if grew else down
        return Call(movement, len(baseline), len(recent), p, shift,
                    f"median {_pct(shift)} (p={p:.3f} <= {ALPHA})")
    p = min(up, down)
    why = (f"median {_pct(shift)}, p={p:.3f}: " + ("within chance" if p > ALPHA else
           f"smaller than the {min_effect:.0%} that counts"))
    return Call(Movement.NO_CHANGE, len(baseline), len(recent), p, shift, why)


def causes(figures: Sequence[str]) -> dict[str, list[str]]:
    """Pure: each called figure that did not only move with another called one, with those
    that moved with it (`{"duration_s": ["lock_hold_s"]}`), in the order given."""
    called = set(figures)
    out: dict[str, list[str]] = {f: [] for f in figures if MOVES_WITH.get(f) not in called}
    for f in figures:
        if f not in out:
            out[MOVES_WITH[f]].append(f)
    return out


def _finite(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _pct(shift: float | None) -> str:
    return "moved from a zero median" if shift is None else f"{shift:+.1%}"

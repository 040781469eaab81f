"""Whether a control's figure moved: a regression called with statistics, never by eye. Pure.

The question a night owner asks of a figure (a duration, a lock wait, a throughput) is
whether tonight's runs are drawn from the same distribution as the earlier accepted runs
of the same control, image Id and host. A single run against a mean and a tolerance
answers it badly: noise makes false alarms, and a real step hides under a wide band. So
the call is made as google/benchmark's `compare.py` and asv make theirs:

- a **rank test** (one-sided Mann-Whitney U, exact for these sizes, a tie broken against
  the call)
  of the recent runs against the baseline: no assumption about the figure's distribution,
  and one wild run moves a rank by one, not the mean by a lot;
- an **effect floor**: the median must also have moved by at least `min_effect` of the
  baseline's median, so a shift too small to matter is never paged however steady the
  series;
- a **minimum baseline**: below `min_baseline` earlier runs the answer is
  "insufficient data", never a call.

With two recent runs (tonight's and its confirmation rerun, or last night's) against nine
earlier ones the smallest p-value the test can give is 1/55, so the level `alpha` 0.05 is
reachable only when both recent runs lie beyond every earlier one but one: a step is
called within two nights, and noise is called at most about 2 times in 55 before the
effect floor removes most of those (the tests measure both rates on generated series).
"""

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
    """How many of the C(m+n, m) orderings of m recent and n earlier runs give each value
    of U (the pairs where a recent run is above an earlier one), U = 0 .. m*n. Built row
    by row from the recurrence over the largest value: it is a recent run (adding the j
    earlier runs below it) or an earlier one (adding nothing)."""
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
    nothing: tied figures come from rounding, their true order is unknown, and the order
    least favourable to the call is the one taken."""
    return sum(1 for r in recent for b in baseline if r > b)


def p_higher(recent: Sequence[float], baseline: Sequence[float]) -> float:
    """Pure: the exact one-sided p-value that the recent runs are higher than chance puts
    them: P(U >= u) over every ordering of distinct values. With ties it is the p-value of
    the tie-breaking least favourable to the call (the largest of them), so ties never
    make a figure look moved."""
    m, n = len(recent), len(baseline)
    counts = _u_counts(m, n)
    return sum(counts[u_statistic(recent, baseline):]) / math.comb(m + n, m)


def call(recent: Sequence[float], baseline: Sequence[float], worse: Worse, *,
         alpha: float = ALPHA, min_baseline: int = MIN_BASELINE,
         min_effect: float = MIN_EFFECT) -> Call:
    """Pure: did the figure move between `baseline` (earlier accepted runs, oldest first)
    and `recent` (tonight's, with its confirmation rerun or last night's)?"""
    recent = [float(v) for v in recent if _finite(v)][-MAX_RECENT:]
    baseline = [float(v) for v in baseline if _finite(v)][-MAX_BASELINE:]
    if not recent or len(baseline) < min_baseline:
        return Call(Movement.INSUFFICIENT, len(baseline), len(recent), None, None,
                    f"{len(baseline)} earlier runs, {min_baseline} needed before a call")
    before, now = statistics.median(baseline), statistics.median(recent)
    shift = (now / before - 1.0) if before else None
    up, down = p_higher(recent, baseline), p_higher([-v for v in recent],
                                                    [-v for v in baseline])
    grew = up <= alpha and (shift is None or shift >= min_effect)
    fell = down <= alpha and (shift is None or shift <= -min_effect)
    if grew or fell:
        worse_way = grew == (worse == Worse.HIGHER)
        movement = Movement.REGRESSION if worse_way else Movement.IMPROVEMENT
        p = up if grew else down
        return Call(movement, len(baseline), len(recent), p, shift,
                    f"median {_pct(shift)} (p={p:.3f} <= {alpha})")
    p = min(up, down)
    why = (f"median {_pct(shift)}, p={p:.3f}: " + ("within chance" if p > alpha else
           f"smaller than the {min_effect:.0%} that counts"))
    return Call(Movement.NO_CHANGE, len(baseline), len(recent), p, shift, why)


def _finite(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _pct(shift: float | None) -> str:
    return "moved from a zero median" if shift is None else f"{shift:+.1%}"

"""What one run hands the next (pipeline.results.Carried): only fresh, only for the same
inputs, and recorded as taken over."""

from __future__ import annotations

from pathlib import Path

from harness.measure.seal import SourceSeal
from harness.pipeline.results import CARRY_MAX_S, Carried

INPUTS = [Path("/p/campaigns/c.yaml"), Path("/p/controls/a.yaml")]


def carried(taken: float = 100.0, **kw) -> Carried:
    fields = {"from_run": "a-1", "taken_at": "2026-11-30T20:00:00Z", "taken": taken,
              "inputs": tuple(map(str, INPUTS)), "host": {"schema": "harness.host/v1"},
              "seal": SourceSeal("sha256:" + "0" * 64, {})}
    return Carried(**{**fields, **kw})


def test_fresh_and_for_the_same_inputs_it_is_taken() -> None:
    assert carried().usable(INPUTS, now=100.0)
    assert carried().usable(INPUTS, now=100.0 + CARRY_MAX_S)


def test_too_old_or_from_the_future_it_is_measured_again() -> None:
    assert not carried().usable(INPUTS, now=100.0 + CARRY_MAX_S + 0.01)
    assert not carried().usable(INPUTS, now=99.0)  # a clock that went back: trust nothing


def test_a_seal_over_other_inputs_is_never_taken() -> None:
    assert not carried().usable([*INPUTS, Path("/p/images.lock")], now=100.0)
    assert not carried().usable(list(reversed(INPUTS)), now=100.0)


def test_the_record_says_what_was_taken_over_and_from_which_run() -> None:
    assert carried().record(host=True) == {"from_run": "a-1", "taken_at": "2026-11-30T20:00:00Z",
                                           "source_seal": True, "host_before": True}
    # a run refused in preflight writes no host-before.json: nothing of the host was taken
    assert carried().record(host=False)["host_before"] is False
    assert carried(host=None).record(host=True)["host_before"] is False

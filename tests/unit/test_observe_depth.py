"""The one depth check of every reader of hostile JSON (encode.depth, encode.deeper_than).

`depth` stops as soon as the walk passes `limit`, so what it returns is the document's
depth up to `limit` and `limit + 1` past it, whatever the limit; `deeper_than` may skip the
walk only when the text has too few brackets to be deeper, whichever brackets they are and
whether the text is bytes or str. Both are checked here against a recursive reference
over documents of every shape up to a few levels."""

from __future__ import annotations

import itertools
import json

import pytest

from harness.instrument.harness_observer.encode import deeper_than, depth


def reference(value) -> int:
    """The nesting depth, the obvious recursive way."""
    if isinstance(value, dict):
        return 1 + max((reference(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference(v) for v in value), default=0)
    return 0


def shapes(levels: int) -> list:
    """Every document built from scalars, lists and dicts up to `levels` deep, in a few
    widths: enough to reach each branch of the walk."""
    found = [0, "s", None]
    for _ in range(levels):
        found = found + [[v] for v in found] + [{"k": v} for v in found] + [
            [a, {"k": b}] for a, b in itertools.islice(itertools.product(found, found), 40)]
    return found


DOCUMENTS = shapes(3)


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 5])
def test_depth_is_exact_up_to_the_limit_and_the_limit_plus_one_past_it(limit):
    for value in DOCUMENTS:
        assert depth(value, limit) == min(reference(value), limit + 1), (value, limit)


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 5])
def test_deeper_than_agrees_with_the_depth_for_bytes_and_str(limit):
    for value in DOCUMENTS:
        text = json.dumps(value)
        want = reference(value) > limit
        assert deeper_than(text, value, limit) is want, (text, limit)
        assert deeper_than(text.encode(), value, limit) is want, (text, limit)


def test_objects_alone_are_counted_as_deep_as_lists():
    value = {"a": {"a": {"a": {"a": 1}}}}
    text = json.dumps(value)
    assert deeper_than(text, value, 3) and deeper_than(text.encode(), value, 3)
    assert not deeper_than(text, value, 4) and not deeper_than(text.encode(), value, 4)

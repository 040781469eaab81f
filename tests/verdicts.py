"""Reading a verdict document's reasons in tests: each must be a `{"rule", "detail"}`
object (a verdict.json never says who found a reason: the step that wrote it did), and a
test compares them as the lines a person reads ("RULE: detail")."""

from __future__ import annotations

from typing import Any

from harness.base.reason import Reason


def texts(reasons: Any) -> list[str]:
    """The reasons of a verdict document as lines; fails on any reason not an object."""
    assert isinstance(reasons, list), reasons
    assert all(isinstance(r, dict) and set(r) == {"rule", "detail"} for r in reasons), reasons
    return [Reason(r["rule"], r["detail"]).text() for r in reasons]

"""The pure rules by which the controller follows a job: grace, lost, retry exclude, pace."""

from __future__ import annotations

import pytest

from harness.base.errors import InvalidInput
from harness.measure.slurm import follow
from harness.measure.slurm.query import JobState


def test_grace_and_lost() -> None:
    assert not follow.seal_overdue(100.0, 159.9, 60)
    assert follow.seal_overdue(100.0, 160.0, 60)
    assert not follow.lost(None, 1e9, 10)
    assert not follow.lost(100.0, 105.0, 10) and follow.lost(100.0, 110.0, 10)


@pytest.mark.parametrize("excluded,node,ended,policy,out", [
    ((), "node1", JobState.NODE_FAIL, "node-fail", ("node1",)),
    ((), "node1", JobState.CANCELLED, "node-fail", ()),
    (("node2",), "node1", JobState.CANCELLED, "always", ("node2", "node1")),
    (("node2",), "node1", JobState.NODE_FAIL, "never", ("node2",)),
    (("node1",), "node1", JobState.NODE_FAIL, "node-fail", ("node1",)),
    ((), None, JobState.NODE_FAIL, "always", ()),
    (("a", "b", "c"), "d", JobState.NODE_FAIL, "node-fail", ("b", "c", "d")),  # bound 3
])
def test_retry_exclude(excluded, node, ended, policy, out) -> None:
    limit = 3 if len(excluded) == 3 else 8
    assert follow.retry_exclude(excluded, node, ended, policy=policy, max_excluded=limit) == out


def test_retry_exclude_refuses_unknown_policy() -> None:
    with pytest.raises(InvalidInput, match="exclude policy"):
        follow.retry_exclude((), "n", JobState.NODE_FAIL, policy="sometimes")


def test_poll_back_off() -> None:
    assert follow.next_poll_s(2.0, changed=False, failures=0) == 3.0
    assert follow.next_poll_s(50.0, changed=False, failures=0) == 60.0
    assert follow.next_poll_s(60.0, changed=True, failures=0) == 2.0
    assert follow.next_poll_s(0.1, changed=False, failures=0) == 2.0
    assert [follow.next_poll_s(2.0, changed=False, failures=f) for f in (1, 2, 3, 5, 99)] == [
        4.0, 8.0, 16.0, 60.0, 60.0]

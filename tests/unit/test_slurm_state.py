"""A remote row's transitions, resume after kill -9, the submit window and the poll pace."""

from __future__ import annotations

import pytest

from harness.errors import InvalidInput
from harness.slurm import state
from harness.slurm.query import Job, JobState
from harness.slurm.state import Remote, Step

TOKEN = "harness+rehearsal-20261130T021500Z+0+1+rehearsal-compute"

LEGAL = [
    ("planned", "submit", "submitting"), ("submitting", "submitted", "submitted"),
    ("submitting", "submit-failed", "failed"), ("submitting", "withdraw", "planned"),
    ("submitted", "start", "running"), ("submitted", "slurm-end", "awaiting-seal"),
    ("submitted", "withdraw", "planned"), ("running", "slurm-end", "awaiting-seal"),
    ("running", "requeued", "submitted"), ("awaiting-seal", "requeued", "submitted"),
    ("awaiting-seal", "withdraw", "planned"), ("awaiting-seal", "seal-overdue", "interrupted"),
    ("awaiting-seal", "accept", "accepted"), ("awaiting-seal", "refuse", "refused"),
    ("awaiting-seal", "fail", "failed"), ("awaiting-seal", "time-out", "timed-out"),
    ("awaiting-seal", "interrupt", "interrupted"), ("running", "accept", "accepted"),
    ("running", "interrupt", "interrupted"), ("submitted", "refuse", "refused"),
]


@pytest.mark.parametrize("before,event,after", LEGAL)
def test_legal_transitions(before: str, event: str, after: str) -> None:
    assert state.transition(before, event) == after


def test_the_table_is_exactly_the_legal_list_plus_evidence() -> None:
    evidence = {(s, e) for s in ("submitted", "running", "awaiting-seal")
                for e in ("accept", "refuse", "fail", "time-out", "interrupt")}
    assert set(state.TRANSITIONS) == {(b, e) for b, e, _ in LEGAL} | evidence
    assert set(state.TRANSITIONS.values()) <= set(state.STATES)


ILLEGAL = [
    ("planned", "submitted"), ("planned", "start"), ("planned", "accept"),
    ("submitting", "start"), ("submitting", "accept"), ("submitting", "slurm-end"),
    ("submitted", "submit"), ("running", "start"), ("running", "withdraw"),
    ("running", "seal-overdue"), ("submitted", "seal-overdue"), ("awaiting-seal", "start"),
    ("accepted", "interrupt"), ("refused", "accept"), ("interrupted", "submit"),
    ("failed", "requeued"), ("timed-out", "slurm-end"), ("planned", "nonsense"),
]


@pytest.mark.parametrize("before,event", ILLEGAL)
def test_illegal_transitions_raise(before: str, event: str) -> None:
    with pytest.raises(state.IllegalTransition, match=f"cannot '{event}'"):
        state.transition(before, event)


def test_terminal_states_take_no_event() -> None:
    for terminal in state.TERMINAL | {"interrupted"}:
        assert not [e for (s, e) in state.TRANSITIONS if s == terminal]


def job(st: JobState, node: str | None = "node1", job_id: str = "7") -> Job:
    return Job(job_id, TOKEN, st, st.name, node)


@pytest.mark.parametrize("row_state,answer,cancelled,event", [
    ("submitted", job(JobState.PENDING, None), False, None),
    ("submitted", job(JobState.RUNNING), False, "start"),
    ("submitted", job(JobState.DONE), False, "slurm-end"),
    ("submitted", job(JobState.CANCELLED, None), True, "withdraw"),
    ("submitted", job(JobState.CANCELLED, None), False, "slurm-end"),  # an admin's scancel
    ("submitted", job(JobState.CANCELLED, "node1"), True, "slurm-end"),  # it had started
    ("running", job(JobState.RUNNING), False, None),
    ("running", job(JobState.NODE_FAIL), False, "slurm-end"),
    ("running", job(JobState.TIMEOUT), False, "slurm-end"),
    ("running", job(JobState.PENDING, None), False, "requeued"),
    ("running", job(JobState.UNKNOWN), False, None),
    ("running", None, False, None),  # missing: never failed
    ("awaiting-seal", job(JobState.DONE), False, None),
    ("awaiting-seal", job(JobState.PENDING, None), False, "requeued"),
    ("accepted", job(JobState.RUNNING), False, None),
    ("submitting", job(JobState.RUNNING), False, None),  # resume adopts, not polling
])
def test_on_slurm(row_state: str, answer: Job | None, cancelled: bool, event: str | None) -> None:
    assert state.on_slurm(row_state, answer, we_cancelled=cancelled) == event
    if event is not None:
        state.transition(row_state, event)  # every event it gives is legal


def test_on_evidence_only_for_live_rows() -> None:
    assert state.on_evidence("awaiting-seal", "accepted") == "accept"
    assert state.on_evidence("running", "interrupted") == "interrupt"
    with pytest.raises(state.IllegalTransition):
        state.on_evidence("planned", "accepted")
    with pytest.raises(state.IllegalTransition):
        state.on_evidence("accepted", "refused")
    with pytest.raises(InvalidInput, match="not a sealed run status"):
        state.on_evidence("running", "running")


def test_grace_and_lost() -> None:
    assert not state.seal_overdue(100.0, 159.9, 60)
    assert state.seal_overdue(100.0, 160.0, 60)
    assert not state.lost(None, 1e9, 10)
    assert not state.lost(100.0, 105.0, 10) and state.lost(100.0, 110.0, 10)


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
    assert state.retry_exclude(excluded, node, ended, policy=policy, max_excluded=limit) == out


def test_retry_exclude_refuses_unknown_policy() -> None:
    with pytest.raises(InvalidInput, match="exclude policy"):
        state.retry_exclude((), "n", JobState.NODE_FAIL, policy="sometimes")


def row(row_id: int, st: str, *, since: float = 0.0, job_id: str | None = None,
        token: str | None = TOKEN) -> Remote:
    return Remote(row_id, st, token=token, job_id=job_id, since=since)


def test_resume_adopts_by_token_and_cancels_duplicates() -> None:
    rows = [row(1, "submitting", since=0.0)]
    found = {TOKEN: [job(JobState.RUNNING, job_id="7"), job(JobState.PENDING, None, "9"),
                     job(JobState.DONE, "node1", "11")]}
    steps = state.resume_steps(rows, found, now=1000.0, history_complete=False)
    assert steps == [Step("adopt", rows[0], "7", ("9",))]  # ended 11 needs no cancel


@pytest.mark.parametrize("age,history,kind", [
    (1.0, True, "wait"), (1.0, False, "wait"), (30.0, False, "resubmit"),
    (30.0, True, "resubmit"), (299.0, False, "resubmit"), (301.0, True, "resubmit"),
    (301.0, False, "unsure"),
])
def test_resume_without_a_job_never_duplicates(age: float, history: bool, kind: str) -> None:
    rows = [row(1, "submitting", since=1000.0)]
    steps = state.resume_steps(rows, {}, now=1000.0 + age, history_complete=history)
    assert [s.kind for s in steps] == [kind]


def test_resume_cancels_other_live_jobs_of_a_submitted_row() -> None:
    rows = [row(1, "running", job_id="7"), row(2, "submitted", job_id="8", token="other"),
            row(3, "accepted", job_id="5"), row(4, "planned", token=None)]
    found = {TOKEN: [job(JobState.RUNNING, job_id="7"), job(JobState.PENDING, None, "12")],
             "other": [job(JobState.PENDING, None, "8")]}
    steps = state.resume_steps(rows, found, now=0.0, history_complete=True)
    assert steps == [Step("cancel", rows[0], "7", ("12",))]


@pytest.mark.parametrize("pending,planned,window,stopping,out", [
    (0, 10, 4, False, 4), (3, 10, 4, False, 1), (4, 10, 4, False, 0), (6, 10, 4, False, 0),
    (0, 2, 4, False, 2), (0, 10, 4, True, 0), (0, 10, 0, False, 0), (-1, 10, 2, False, 2),
])
def test_submit_window(pending, planned, window, stopping, out) -> None:
    assert state.to_submit(pending, planned, window=window, stopping=stopping) == out


def test_stop_cancels_only_pending_jobs() -> None:
    rows = [row(1, "submitted", job_id="1"), row(2, "running", job_id="2"),
            row(3, "submitting"), row(4, "awaiting-seal", job_id="4")]
    assert [r.row_id for r in state.to_cancel_on_stop(rows)] == [1]


def test_poll_back_off() -> None:
    assert state.next_poll_s(2.0, changed=False, failures=0) == 3.0
    assert state.next_poll_s(50.0, changed=False, failures=0) == 60.0
    assert state.next_poll_s(60.0, changed=True, failures=0) == 2.0
    assert state.next_poll_s(0.1, changed=False, failures=0) == 2.0
    assert [state.next_poll_s(2.0, changed=False, failures=f) for f in (1, 2, 3, 5, 99)] == [
        4.0, 8.0, 16.0, 60.0, 60.0]
    assert not state.query_gave_up(4) and state.query_gave_up(5)

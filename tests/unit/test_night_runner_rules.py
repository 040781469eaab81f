"""The night runner's pure rules: deadline, finished or not, exit code; the rerun index fold."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest

from harness.base.errors import InvalidInput
from harness.base.reason import Reason
from harness.driver.night.rules import night_deadline, night_exit_code, past, unfinished
from harness.driver.policy import RetryPolicy
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.nightfolder.progress import progress
from harness.measure.nightfolder.rows import Row
from harness.measure.runfolder.reruns import fold_index

NOW = datetime(2026, 11, 30, 22, 15, tzinfo=timezone(timedelta(hours=1)))


def row(i: int, state: str, attempt: int = 1, reason: str | None = None,
        plan_index: int | None = None, exit_class: int | None = None) -> Row:
    return Row(i, i if plan_index is None else plan_index, f"c{i}", 0, attempt, state,
               None, None, reason, None, "plan", None, "t", exit_class=exit_class)


def test_until_is_the_next_such_local_time():
    assert night_deadline(NOW, "06:30", None, None) == NOW.replace(hour=6, minute=30) + timedelta(1)
    assert night_deadline(NOW, "23:00", None, None) == NOW.replace(hour=23, minute=0)
    assert night_deadline(NOW, "22:15", None, None) == NOW + timedelta(days=1)  # now is not "after"


def test_the_earlier_of_until_and_max_hours_wins():
    assert night_deadline(NOW, "23:00", 0.5, None) == NOW + timedelta(minutes=30)
    assert night_deadline(NOW, "22:30", 2, None) == NOW.replace(minute=30)
    assert night_deadline(NOW, None, None, None) is None


@pytest.mark.parametrize("bad", ["6", "24:00", "7:60", "noon", "06:30:00"])
def test_bad_until_is_invalid_input(bad):
    with pytest.raises(InvalidInput):
        night_deadline(NOW, bad, None, None)


def test_non_positive_max_hours_is_invalid():
    with pytest.raises(InvalidInput):
        night_deadline(NOW, None, 0, None)


def test_past():
    d = datetime(2026, 1, 1, tzinfo=UTC)
    assert past(d, d) and past(d, d + timedelta(seconds=1)) and not past(d, d - timedelta(1))
    assert not past(None, d)


def test_unfinished_while_a_slot_can_still_run():
    one = RetryPolicy(1)
    assert unfinished([row(1, "accepted"), row(2, "planned")], one, ended=False)
    assert unfinished([row(1, "deferred")], one, ended=False)
    assert unfinished([row(1, "running")], one, ended=False)
    assert not unfinished([row(1, "accepted"), row(2, "refused"), row(3, "failed")], one,
                          ended=False)
    assert not unfinished([row(1, "interrupted")], one, ended=False)  # no retry allowed
    assert unfinished([row(1, "interrupted")], RetryPolicy(2), ended=False)
    assert not unfinished([row(1, "planned")], one, ended=True)  # ended on purpose


def test_the_newest_attempt_decides_a_slot():
    rows = [row(1, "interrupted", 1, plan_index=0), row(2, "accepted", 2, plan_index=0)]
    assert night_exit_code(rows) == 0
    assert progress(rows) == {"done": 1, "total": 1, "states": {"accepted": 1}}


@pytest.mark.parametrize(("states", "code"), [
    (["accepted", "accepted"], 0),
    (["accepted", "refused"], 1),
    (["accepted", "failed"], 1),
    (["accepted", "interrupted"], 1),
    (["accepted", "planned"], 1),  # left unrun by the deadline
    (["accepted", "deferred"], 3),
    (["refused", "deferred"], 3),
])
def test_exit_code(states, code):
    assert night_exit_code([row(i, s) for i, s in enumerate(states)]) == code


def test_the_stored_exit_class_decides_never_the_reason_text():
    """3 for an environment outcome whatever its text says first; 1 for a refusal whose
    text begins "ENV-" (a post-step's, or a detail's), since only the exit class counts."""
    assert night_exit_code([row(1, "failed", reason="disk full while sealing",
                                exit_class=3)]) == 3
    assert night_exit_code([row(1, "refused", reason="ENV-NO-ENGINE: a post-step said so",
                                exit_class=1)]) == 1
    assert night_exit_code([row(1, "refused", reason="ENV-LOCK-TIMEOUT: w")]) == 1  # no class


@pytest.mark.parametrize("reason", [
    "[gate0] ENV-NO-ENGINE: a post-step cannot claim the host failed",
    "EVIDENCE-BAD-NAME: removed 'a; ENV-DISK-FULL: planted'",  # a workload's file name
    "MODEL-HASH: w differs; [check] ENV-IO: x",
])
def test_a_rule_inside_a_reason_never_makes_a_refusal_an_environment_fault(reason):
    assert night_exit_code([row(1, "refused", reason=reason, exit_class=1)]) == 1


def test_a_journal_row_keeps_its_outcomes_rules_and_exit_class(tmp_path):
    """The journal stores what the night decides on beside the text people read; editing
    the text afterwards (as a differently ordered writer would have written it) changes
    no exit code."""
    path = tmp_path / JOURNAL_NAME
    with Journal.create(path, campaign="c", campaign_file="c.yaml",
                        plan=[("host", 0), ("post", 0)]) as j:
        host, post = j.rows()
        host = j.finish(j.mark_running(host, "host-1", "/runs/host-1"), "failed",
                        [Reason("MODEL-HASH", "w"), Reason("ENV-DEVICE", "no /dev/kfd")])
        post = j.finish(j.mark_running(post, "post-1", "/runs/post-1"), "refused",
                        [Reason("ENV-NO-ENGINE", "x", by="gate0")])
    assert (host.rules, host.exit_class) == (("ENV-DEVICE", "MODEL-HASH"), 3)
    assert (post.rules, post.exit_class) == (("ENV-NO-ENGINE",), 1)
    assert post.reason == "[gate0] ENV-NO-ENGINE: x"
    raw = sqlite3.connect(path)
    raw.execute("UPDATE runs SET reason = 'MODEL-HASH: w; ENV-DEVICE: no /dev/kfd' "
                "WHERE run_id = 'host-1'")
    raw.execute("UPDATE runs SET reason = 'ENV-NO-ENGINE: x' WHERE run_id = 'post-1'")
    raw.commit()
    raw.close()
    with Journal.open(path, readonly=True) as j:
        rows = j.rows()
    assert night_exit_code(rows[:1]) == 3 and night_exit_code(rows[1:]) == 1


def test_rerun_index_fold_keeps_the_last_line_and_skips_torn_ones():
    def line(rid: str, status: str) -> str:
        return json.dumps({"original": {"run_id": "o"}, "rerun": {"run_id": rid},
                           "status": status})
    folded = fold_index([line("a", "running"), line("b", "running"), line("a", "accepted"),
                         '{"original": {"run_id": "o"}, "rer'])
    assert {k: v["status"] for k, v in folded.items()} == {"a": "accepted", "b": "running"}

"""`same_host:` groups: the campaign key checked with positions, the plan's group
instances, and which journal rows a launch (or a resume) takes together. Pure parts."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.config.loader import load_campaign
from harness.config.samehost import instances
from harness.driver.night.source import JournalSource, group_busy, group_rows, left_running
from harness.driver.plan import Outcome
from harness.driver.policy import RetryPolicy
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.nightfolder.rows import Row
from harness.measure.ui import Reporter
from tests.campaign_runs import repo_campaign

REPO = Path(__file__).resolve().parents[2]
HARNESS = str(Path(sys.executable).parent / "harness")


def campaign(tmp_path: Path, groups: str, controls: str = "[night-a, night-b, night-c]") -> Path:
    return repo_campaign(tmp_path, controls, groups)


def test_groups_load_in_their_order(tmp_path: Path) -> None:
    loaded, faults = load_campaign(campaign(tmp_path, "same_host:\n  - [night-c, night-a]\n"))
    assert faults == [] and loaded.same_host == (("night-c", "night-a"),)


@pytest.mark.parametrize(("groups", "line", "col", "words"), [
    ("same_host:\n  - [night-a, nigth-b]\n", 7, 15, "'nigth-b' is not in the campaign's "
                                                     "controls (did you mean 'night-b'?)"),
    ("same_host:\n  - [night-a, night-b]\n  - [night-c, night-a]\n", 8, 15,
     "'night-a' is already in group 1"),
    ("same_host:\n  - [night-a, night-a]\n", 7, 15, "already in this group"),
    ("same_host:\n  - [night-a]\n", 7, 5, "at least 2"),
    ("same_host:\n  - [" + ", ".join(["night-a"] * 9) + "]\n", 7, 5, "at most 8"),
    ("same_host:\n  - night-a\n", 7, 5, "expected a list"),
    ("same_host: [[night-a, 'no spaces']]\n", 6, 23, "expected a name"),
])
def test_bad_groups_are_refused_at_their_position(tmp_path: Path, groups: str, line: int,
                                                  col: int, words: str) -> None:
    camp = campaign(tmp_path, groups)
    r = subprocess.run([HARNESS, "check", str(camp)], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{camp}:{line}:{col}: " in r.stdout + r.stderr and words in r.stdout + r.stderr


def test_members_must_be_planned_equally_often(tmp_path: Path) -> None:
    camp = campaign(tmp_path, "same_host:\n  - [night-a, night-b]\n",
                    "[{control: night-a, repeat: 2}, night-b]")
    loaded, faults = load_campaign(camp)
    assert loaded is None and [(f.line, f.col) for f in faults] == [(7, 5)]
    assert "night-a x2, night-b x1" in str(faults[0])


def test_instances_pair_the_kth_run_of_each_member_in_the_groups_order() -> None:
    plan = [("a", 0), ("x", 0), ("b", 0), ("a", 1), ("b", 1)]
    got = instances(plan, [("b", "a")])
    assert got == {2: (2, 0), 0: (2, 0), 4: (4, 3), 3: (4, 3)}
    assert instances(plan, []) == {}


def row(rid: int, slot: int, control: str, state: str, attempt: int = 1) -> Row:
    return Row(rid, slot, control, 0, attempt, state, None, None, None, None, "plan", None, "t")


GROUPS = {0: (2, 0), 2: (2, 0)}  # slots 2 then 0 run together, slot 1 alone


def test_a_launch_takes_the_groups_planned_members_in_its_order() -> None:
    rows = [row(1, 0, "a", "planned"), row(2, 1, "x", "planned"), row(3, 2, "b", "planned")]
    assert [r.id for r in group_rows(rows[0], rows, GROUPS)] == [3, 1]
    assert group_rows(rows[1], rows, GROUPS) == [rows[1]]
    # a retry: b was accepted, a's newest attempt is planned again: a alone
    retry = [row(1, 0, "a", "interrupted"), row(3, 2, "b", "accepted"),
             row(4, 0, "a", "planned", attempt=2)]
    assert [r.id for r in group_rows(retry[2], retry, GROUPS)] == [4]


def test_a_partner_of_a_slot_in_flight_is_busy_too() -> None:
    assert group_busy(frozenset({0}), GROUPS) == {0, 2}
    assert group_busy(frozenset({1}), GROUPS) == {1}


def test_a_resume_follows_the_groups_running_rows_together() -> None:
    rows = [row(1, 0, "a", "running"), row(2, 1, "x", "running"), row(3, 2, "b", "running")]
    assert [r.id for r in left_running(rows[0], rows, GROUPS)] == [3, 1]
    assert left_running(rows[1], rows, GROUPS) == [rows[1]]
    rows[2] = row(3, 2, "b", "planned")  # killed between the two members' `running`
    assert [r.id for r in left_running(rows[0], rows, GROUPS)] == [1]


def night_source(tmp_path: Path, plan: list[tuple[str, int]], groups: list[tuple[str, ...]]):
    journal = Journal.create(tmp_path / JOURNAL_NAME, campaign="c", campaign_file="c.yaml",
                             plan=plan)
    night = SimpleNamespace(policy=RetryPolicy(1), ui=Reporter(io.StringIO()), deadline=None,
                            doctor=lambda row: [], runs_dir=tmp_path / "runs",
                            instances=instances(plan, groups))
    return JournalSource(night, journal), journal


def test_one_host_runs_a_groups_members_one_after_another(tmp_path: Path) -> None:
    """Local executor: a group's next member comes before the plan's next control."""
    source, journal = night_source(tmp_path, [("a", 0), ("x", 0), ("b", 0)], [("a", "b")])
    order = []
    while not isinstance(launch := source.next_launches(together=False), str):
        [request] = launch
        source.started(request)
        source.finished(request, Outcome.of(request.run_dir, "accepted"))
        order.append(request.control)
    assert order == ["a", "b", "x"]
    journal.close()


def test_the_window_gets_a_groups_members_as_one_launch(tmp_path: Path) -> None:
    source, journal = night_source(tmp_path, [("a", 0), ("x", 0), ("b", 0)], [("b", "a")])
    group = source.next_launches(together=True)
    assert [r.control for r in group] == ["b", "a"]
    for r in group:
        source.started(r)
    assert [r.control for r in source.next_launches(frozenset({2}), together=True)] == ["x"]
    assert source.next_launches(frozenset({2, 1}), together=True) == "done"  # 0: its partner
    source.withdrawn(group[0], "not run: a test")  # the group's pending job was cancelled
    source.withdrawn(group[1], "not run: a test")
    assert {r.state for r in journal.rows() if r.control != "x"} == {"planned"}
    journal.close()

"""Parsers of squeue, sacct -P and jobcomp/filetxt output: real-looking lines, arrays, steps,
garbage. squeue and jobcomp lines below were captured from Slurm 22.05.8 (Debian bookworm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.measure.slurm import query
from harness.measure.slurm.query import Job, JobState

TOKEN = "harness+rehearsal-20261130T021500Z+0+1+rehearsal-compute"

SQUEUE = f"""\
5|wrap|PENDING||Resources
6_[2-5%2]|wrap|PENDING||Resources
7|wrap|PENDING||Priority
4|wrap|RUNNING|node1|None
6_1|wrap|RUNNING|node1|None
3|wrap|CANCELLED|node1|None
1|{TOKEN}|COMPLETED|node1|None
8|wrap|TIMEOUT|node1|TimeLimit
9|wrap|NODE_FAIL|node2|None
10|wrap|PENDING||ReqNodeNotAvail, UnavailableNodes:node2
11|a|b|c|COMPLETING|node1|None
"""

SACCT = f"""\
12|{TOKEN}|COMPLETED|0:0|node1
12.batch|batch|COMPLETED|0:0|node1
12.extern|extern|COMPLETED|0:0|node1
13|x|CANCELLED by 0|0:15|node2
13.batch|batch|CANCELLED|0:15|node2
14|y|NODE_FAIL|0:0|node1
15|z|REQUEUED|0:0|None assigned
16|t|TIMEOUT|0:0|node1
16.batch|batch|CANCELLED|0:15|node1
17|m|OUT_OF_MEMORY|0:125|node1
18|f|FAILED|1:0|node2
19_[1-3,7%2]|arr|PENDING|0:0|None assigned
20_4|arr|RUNNING|0:0|node1
21|p|PENDING|0:0|None assigned
21.batch|batch|RUNNING|0:0|node9
22|c|CANCELLED+|0:0|
23+0|het|RUNNING|0:0|node1
"""

# jobcomp/filetxt lines as Slurm 22.05 writes them (a trailing space each); job 7's name and
# work dir were given spaces, and job 4 was requeued after NODE_FAIL, then completed.
JOBCOMP = (Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
           / "jobcomp-22.05.txt").read_text()


def test_squeue_states_nodes_reasons_and_compact_arrays() -> None:
    parsed = query.parse_squeue(SQUEUE, strict=True)
    jobs = parsed.jobs
    assert parsed.skipped == []
    assert {i: j.state for i, j in jobs.items() if not i.startswith("6_")} == {
        "5": JobState.PENDING, "7": JobState.PENDING, "4": JobState.RUNNING,
        "3": JobState.CANCELLED, "1": JobState.DONE, "8": JobState.TIMEOUT,
        "9": JobState.NODE_FAIL, "10": JobState.PENDING, "11": JobState.RUNNING}
    assert [i for i in jobs if i.startswith("6_")] == ["6_2", "6_3", "6_4", "6_5", "6_1"]
    assert jobs["6_4"].state == JobState.PENDING and jobs["6_1"].node == "node1"
    assert jobs["5"].node is None and jobs["5"].reason == "Resources"
    assert jobs["4"].reason is None  # squeue's "None" is no reason
    assert jobs["10"].reason == "ReqNodeNotAvail, UnavailableNodes:node2"
    assert jobs["11"].name == "a|b|c"  # a name holding the separator is rejoined
    assert jobs["1"].name == TOKEN


def test_sacct_steps_merge_and_never_decide() -> None:
    jobs = query.parse_sacct(SACCT, strict=True).jobs
    assert jobs["12"] == Job("12", TOKEN, JobState.DONE, "COMPLETED", "node1", 0, 0)
    assert "12.batch" not in jobs and "12.extern" not in jobs
    assert jobs["13"].state == JobState.CANCELLED and jobs["13"].cancelled_by == "0"
    assert jobs["13"].raw_state == "CANCELLED by 0" and jobs["13"].signal == 15
    assert jobs["14"].state == JobState.NODE_FAIL
    assert jobs["15"].state == JobState.PENDING and jobs["15"].node is None  # REQUEUED
    assert jobs["16"].state == JobState.TIMEOUT  # its batch step says CANCELLED: ignored
    assert jobs["17"].state == JobState.DONE and jobs["17"].raw_state == "OUT_OF_MEMORY"
    assert jobs["18"].state == JobState.DONE and jobs["18"].exit_code == 1
    assert [i for i in jobs if i.startswith("19_")] == ["19_1", "19_2", "19_3", "19_7"]
    assert jobs["20_4"].state == JobState.RUNNING
    assert jobs["21"].state == JobState.PENDING and jobs["21"].node == "node9"  # from step
    assert jobs["22"].state == JobState.CANCELLED and jobs["22"].node is None
    assert jobs["23"].state == JobState.RUNNING  # a het-job component: its job


def test_jobcomp_lines_arrays_requeues_and_spaces() -> None:
    jobs = query.parse_jobcomp(JOBCOMP, strict=True).jobs
    assert jobs["1"].name == "harness+n+0+1+a:b" and jobs["1"].state == JobState.DONE
    assert jobs["5"].state == JobState.CANCELLED and jobs["5"].node is None  # (null)
    assert jobs["6_1"].state == JobState.DONE and "8" not in jobs
    assert jobs["6_5"].state == JobState.DONE and "6" not in jobs  # 22.05's mangled task
    assert jobs["7"].name == "my job here" and jobs["7"].state == JobState.TIMEOUT
    assert jobs["7"].signal == 1
    assert jobs["4"].state == JobState.DONE  # NODE_FAIL, requeued, then done: last line


def test_missing_rows_are_absent_never_failed() -> None:
    jobs = query.combine(query.parse_squeue(SQUEUE), query.parse_sacct(SACCT))
    assert jobs["4"].state == JobState.RUNNING and jobs["12"].state == JobState.DONE
    assert "999" not in jobs and "6_9" not in jobs


def test_live_answer_wins_over_history() -> None:
    live = query.parse_squeue("4|wrap|PENDING||BeginTime\n")  # requeued after NODE_FAIL
    history = query.parse_jobcomp(JOBCOMP.splitlines()[3] + "\n")
    assert history.jobs["4"].state == JobState.NODE_FAIL
    assert query.combine(live, history)["4"].state == JobState.PENDING
    assert query.combine(None, history)["4"].state == JobState.NODE_FAIL


@pytest.mark.parametrize("raw,state", [
    ("CANCELLED by 1000", JobState.CANCELLED), ("CANCELLED+", JobState.CANCELLED),
    ("DEADLINE", JobState.CANCELLED), ("PREEMPTED", JobState.CANCELLED),
    ("BOOT_FAIL", JobState.NODE_FAIL), ("REQUEUE_HOLD", JobState.PENDING),
    ("SUSPENDED", JobState.RUNNING), ("CD", JobState.DONE), ("NF", JobState.NODE_FAIL),
    ("TO", JobState.TIMEOUT), ("", JobState.UNKNOWN), ("EXPLODED", JobState.UNKNOWN),
    ("running", JobState.UNKNOWN),
])
def test_state_map(raw: str, state: JobState) -> None:
    assert query.map_state(raw) == state


GARBAGE = [
    "", "hello", "12|name|COMPLETED|0:0", "abc|n|RUNNING|0:0|node1", "12|n|RUNNING|x:y|node1",
    "12_[5-1]|n|PENDING|0:0|", "12_[1-999999]|n|PENDING|0:0|", "12_[1-3%x]|n|PENDING|0:0|",
    "12|n\x1b[31m|RUNNING|0:0|node1", "1" * 20 + "|n|RUNNING|0:0|node1",
    "12|" + "n" * 9000 + "|RUNNING|0:0|node1",
]


def test_sacct_garbage_is_counted_or_raised_precisely() -> None:
    text = "12|ok|RUNNING|0:0|node1\n" + "\n".join(GARBAGE) + "\n13|ok|PENDING|0:0|\n"
    parsed = query.parse_sacct(text)
    assert sorted(parsed.jobs) == ["12", "13"]
    assert len(parsed.skipped) == len([g for g in GARBAGE if g]) == 10
    assert parsed.skipped[0] == "line 3: 1 fields, expected 5"
    assert any("array range '5-1' is reversed" in s for s in parsed.skipped)
    assert any("stands for more than 100000 elements" in s for s in parsed.skipped)
    with pytest.raises(InvalidInput, match=r"^sacct line 3: 1 fields, expected 5$"):
        query.parse_sacct(text, strict=True)


def test_squeue_and_jobcomp_garbage() -> None:
    parsed = query.parse_squeue("1.batch|b|RUNNING|n|None\nnot a line\n2|ok|RUNNING|n|None\n")
    assert list(parsed.jobs) == ["2"] and len(parsed.skipped) == 2
    assert "steps" in parsed.skipped[0]
    bad = ["JobId=1 Name=a", "Name=a JobState=RUNNING", "JobId=1 JobId=2 Name=a JobState=X",
           "garbage", "JobId=1_[1-3] Name=a JobState=PENDING", "JobId=x Name=a JobState=Y"]
    parsed = query.parse_jobcomp("\n".join(bad) + "\n")
    assert parsed.jobs == {} and len(parsed.skipped) == len(bad)
    with pytest.raises(InvalidInput, match="jobcomp line 1: no JobState="):
        query.parse_jobcomp(bad[0], strict=True)


def test_by_name_groups_tokens_oldest_first() -> None:
    jobs = query.parse_squeue(f"30|{TOKEN}|PENDING||None\n9|{TOKEN}|RUNNING|node1|None\n"
                              f"10_2|{TOKEN}|PENDING||None\n11|other|PENDING||None\n").jobs
    found = query.by_name(jobs)
    assert [j.job_id for j in found[TOKEN]] == ["9", "10_2", "30"]
    assert [j.job_id for j in found["other"]] == ["11"]


def test_query_argv_are_batched_and_checked() -> None:
    assert query.squeue_argv([TOKEN, TOKEN, "harness+b+1+1+c"]) == [
        "squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%N|%r",
        f"--name=harness+b+1+1+c,{TOKEN}"]
    assert query.sacct_argv(["10", "9", "10_2"])[-1] == "9,10,10_2"
    for bad in (["a,b"], ["-x"], ["a b"]):
        with pytest.raises(InvalidInput):
            query.squeue_argv(bad)
    for bad_ids in ([], ["1.batch"], ["1;2"]):
        with pytest.raises(InvalidInput):
            query.sacct_argv(bad_ids)


def test_history_gives_the_exit_code_of_a_live_end_only() -> None:
    live = query.parse_squeue("7|w|TIMEOUT|node1|TimeLimit\n4|w|PENDING||BeginTime\n")
    history = query.parse_jobcomp(JOBCOMP)  # 7: TIMEOUT 0:1; 4: NODE_FAIL then COMPLETED
    jobs = query.combine(live, history)
    assert jobs["7"].state == JobState.TIMEOUT and jobs["7"].signal == 1
    assert jobs["7"].reason == "TimeLimit"
    assert jobs["4"].state == JobState.PENDING and jobs["4"].exit_code is None

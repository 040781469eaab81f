"""A night and a rerun record the same outcome the same way: both go through the driver's
`run_one`, and each recorder commits `running` before the launch and the run's own status
after it. The executor is an in-memory stand-in (the place a Slurm executor plugs in)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.base.errors import EnvironmentFault
from harness.base.reason import Reason
from harness.driver.drive import crashed, run_one
from harness.driver.night.source import JournalSource
from harness.driver.plan import LaunchRequest, Outcome
from harness.driver.policy import RetryPolicy
from harness.driver.rerun import RerunRecorder
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.runfolder.reruns import INDEX

SEAL_FAILED = EnvironmentFault("could not seal /runs/x: disk full", rule="ENV-SEAL")


class Executor:
    """Answers each launch with the next outcome, after checking the journal said running."""

    def __init__(self, journal: Journal, make) -> None:
        self.journal, self.make = journal, make

    def launch(self, request: LaunchRequest) -> Outcome:
        row = self.journal.by_run_id(request.run_id)
        assert row is not None and row.state == "running", "launched before it was journaled"
        return self.make(request)


def night_journal(folder: Path) -> Journal:
    folder.mkdir()
    return Journal.create(folder / JOURNAL_NAME, campaign="c", campaign_file="c.yaml",
                          plan=[("kv", 0)])


class Ui:
    def event(self, kind: str, **fields: object) -> None:
        pass


def night_source(tmp_path: Path, journal: Journal) -> JournalSource:
    night = SimpleNamespace(policy=RetryPolicy(1), ui=Ui(), deadline=None,
                            doctor=lambda row: [], runs_dir=tmp_path / "runs", instances={})
    return JournalSource(night, journal)


def rerun_recorder(tmp_path: Path, journal: Journal) -> tuple[RerunRecorder, LaunchRequest]:
    row = journal.mark_running(journal.rows()[0], "kv-orig", str(tmp_path / "runs/kv-orig"))
    journal.finish(row, "refused", "POST-GATE: differs")
    link = {"run_id": "kv-orig", "path": str(tmp_path / "runs/kv-orig"), "reason": "again"}
    (tmp_path / "runs").mkdir(exist_ok=True)
    recorder = RerunRecorder(tmp_path / "runs", journal, tmp_path, link)
    request = recorder.plan(LaunchRequest("kv", tmp_path / "runs/kv-new", rerun_of=link))
    return recorder, request


@pytest.mark.parametrize(("make", "state", "reason"), [
    (lambda r: crashed(r, SEAL_FAILED), "failed", "ENV-SEAL: could not seal /runs/x: disk full"),
    (lambda r: Outcome.of(r.run_dir, "timed-out", [Reason("RUN-TIMEOUT", "1m")]), "timed-out",
     "RUN-TIMEOUT: 1m"),
    (lambda r: Outcome.of(r.run_dir, "accepted"), "accepted", None),
])
def test_night_and_rerun_record_an_outcome_alike(tmp_path: Path, make, state, reason) -> None:
    with night_journal(tmp_path / "n") as j:
        source = night_source(tmp_path, j)
        [request] = source.next_launches()
        outcome = run_one(request, Executor(j, make), source)
        night_row = j.by_run_id(request.run_id)
    with night_journal(tmp_path / "r") as j:
        recorder, request = rerun_recorder(tmp_path / "r", j)
        assert request.attempt == 2  # the journal numbers the rerun's attempt
        run_one(request, Executor(j, make), recorder)
        rerun_row = j.by_run_id(request.run_id)
        assert j.by_run_id("kv-orig").state == "refused"  # the original stays as it was
    assert (night_row.state, night_row.reason) == (rerun_row.state, rerun_row.reason) == (
        state, reason)
    assert (night_row.rules, night_row.exit_class) == (rerun_row.rules, rerun_row.exit_class)
    assert night_row.exit_class == {"failed": 3, "timed-out": 1, "accepted": 0}[state]
    assert (outcome.error is not None) == (state == "failed")
    index = [json.loads(line) for line in (tmp_path / "r/runs" / INDEX).read_text().splitlines()]
    assert [e["status"] for e in index] == ["running", state]
    assert index[0]["rerun"]["run_id"] == request.run_id

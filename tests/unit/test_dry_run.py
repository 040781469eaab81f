"""The pure parts of `--dry-run` (harness/driver/dryrun.py, harness/cli/dryrun.py): which
slots a night's start would run and in which order, the JSON document's shape, the exit
code when the preflight would refuse, and hostile names printed inert."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness.base.reason import Reason
from harness.base.states import State
from harness.cli.dryrun import needs_dry_run, say
from harness.driver.dryrun import (
    RUN_ID,
    SCHEMA,
    DryRun,
    NightPick,
    PlannedControl,
    approval_line,
    pending_slots,
    placeholders,
    walk_order,
)
from harness.driver.policy import RetryPolicy
from harness.measure.nightfolder.rows import Row
from harness.measure.seal import SourceSeal
from harness.measure.vector import LAUNCHER_PID, LAUNCHER_STARTED

HOSTILE = "ctl\x1b[31mred\x07\r\nfake: accepted"


def row(slot: int, state: State, attempt: int = 1) -> Row:
    return Row(id=slot * 10 + attempt, plan_index=slot, control=f"c{slot}", repeat_index=0,
               attempt=attempt, state=state, run_id=None, run_dir=None, reason=None,
               rerun_of=None, origin="plan", link_reason=None, updated="t")


def planned(name: str, *reasons: Reason) -> PlannedControl:
    return PlannedControl(name, 1, "cpu", "rehearsal", "sha256:" + "a" * 64,
                          ["docker", "run", "--name", f"harness-{name}-{RUN_ID}"], reasons)


def dry(*controls: PlannedControl, runs_dir: str = "/runs", holder: str | None = None
        ) -> DryRun:
    seal = SourceSeal("sha256:" + "b" * 64, {"input:campaign.yaml": "c" * 64})
    return DryRun("night", "camp", Path("/p/camp.yaml"), Path(runs_dir), Path("/l/gpu.lock"),
                  holder, seal, None, controls, ("a note",))


def test_a_fresh_start_runs_interrupted_retries_and_deferred_slots_only() -> None:
    rows = [row(0, State.ACCEPTED), row(1, State.INTERRUPTED), row(2, State.DEFERRED),
            row(3, State.REFUSED), row(4, State.RUNNING), row(5, State.PLANNED),
            row(6, State.INTERRUPTED), row(6, State.INTERRUPTED, attempt=2)]
    assert pending_slots(rows, RetryPolicy(max_attempts=1)) == [2, 5]
    # two attempts: slot 1 and the row left running (recovered as interrupted) run again;
    # slot 6 has used both of its attempts
    assert pending_slots(rows, RetryPolicy(max_attempts=2)) == [1, 2, 4, 5]


def test_only_the_newest_attempt_of_a_slot_decides() -> None:
    rows = [row(0, State.INTERRUPTED), row(0, State.ACCEPTED, attempt=2)]
    assert pending_slots(rows, RetryPolicy(max_attempts=5)) == []


def test_walk_order_is_plan_order_with_same_host_groups_together() -> None:
    assert walk_order([3, 0, 2], {}) == [0, 2, 3]
    groups = {1: (1, 4), 4: (1, 4)}  # slots 1 and 4 run on one host, in that order
    assert walk_order([0, 1, 2, 3, 4], groups) == [0, 1, 4, 2, 3]
    assert walk_order([0, 2, 4], groups) == [0, 2, 4]  # member 1 is done: 4 alone
    reversed_group = {1: (4, 1), 4: (4, 1)}
    assert walk_order([1, 2, 4], reversed_group) == [4, 1, 2]


def test_night_pick_document_names_the_night_it_continues() -> None:
    assert NightPick(None, [("a", 0)], [0]).document() == {
        "continues": None, "slots": [0], "left_running": 0}
    doc = NightPick(Path("/r/nights/n-20260101T000000Z"), [("b", 0)], [1], 1).document()
    assert doc == {"continues": "/r/nights/n-20260101T000000Z", "slots": [1],
                   "left_running": 1}


def test_document_shape_and_exit_zero_when_every_control_would_launch() -> None:
    found = dry(planned("a"), planned("b"))
    doc = found.document()
    assert found.exit_code == 0 and doc["exit_code"] == 0 and doc["would_launch"] is True
    assert doc["schema"] == SCHEMA and doc["command"] == "night"
    assert doc["lock"] == {"path": "/l/gpu.lock", "free": True, "holder": None}
    assert doc["seal"] == {"digest": "sha256:" + "b" * 64, "files": 1}
    assert [c["control"] for c in doc["controls"]] == ["a", "b"]
    assert set(doc["controls"][0]) == {"control", "repeats", "device", "image", "image_id",
                                       "argv", "would_launch", "refused"}
    assert doc["notes"] == ["a note"] and doc["run_id"] == RUN_ID
    json.dumps(doc)  # every value is JSON as it is


def test_one_refused_control_makes_the_whole_dry_run_exit_one() -> None:
    why = Reason("SEAL-NOT-APPROVED", "no approval of seal x")
    found = dry(planned("a"), planned("b", why))
    assert found.exit_code == 1
    doc = found.document()
    assert doc["would_launch"] is False and doc["exit_code"] == 1
    assert doc["controls"][0]["would_launch"] is True
    assert doc["controls"][1]["refused"] == [why.as_dict()]
    lines = found.lines()
    assert "     would be refused: SEAL-NOT-APPROVED: no approval of seal x" in lines
    assert lines[-1] == "would refuse 1 of 2 controls (exit 1)"


def test_held_lock_and_approval_in_words() -> None:
    lines = dry(planned("a"), holder="night of campaign x (pid 7)").lines()
    assert "lock      /l/gpu.lock: held by night of campaign x (pid 7)" in lines
    assert approval_line(None, False) == "not required by the campaign"
    assert approval_line(None, True).startswith("required, and none of this seal")
    assert approval_line({"file": "f.json", "seal": "s", "commit": "0123456789abcdef"},
                         True) == "f.json (seal s, commit 0123456789ab)"


def test_launcher_labels_become_placeholders() -> None:
    argv = ["--label", f"{LAUNCHER_PID}=4242", "--label", f"{LAUNCHER_STARTED}=99",
            "--env", "X=1"]
    assert placeholders(argv) == ["--label", f"{LAUNCHER_PID}=<pid>", "--label",
                                  f"{LAUNCHER_STARTED}=<start time>", "--env", "X=1"]


def _printed(found: DryRun, as_json: bool) -> str:
    @click.command()
    def show() -> None:
        say(found, as_json=as_json, extra={"night": {"continues": HOSTILE}})

    result = CliRunner().invoke(show)
    assert result.exit_code == 0, result.output
    return result.output


def test_hostile_names_and_paths_are_printed_inert() -> None:
    found = dry(planned(HOSTILE, Reason("IMAGE-MISMATCH", HOSTILE)),
                runs_dir=f"/tmp/{HOSTILE}", holder=HOSTILE)
    for as_json in (False, True):
        out = _printed(found, as_json)
        assert "\x1b" not in out and "\x07" not in out and "\r" not in out
        assert "\nfake: accepted" not in out  # no line of its own
    text = _printed(found, False)
    assert len(text.splitlines()) == len(found.lines())
    doc = json.loads(_printed(found, True))
    assert doc["controls"][0]["control"] == HOSTILE  # escaped on the wire, intact in JSON
    assert doc["night"] == {"continues": HOSTILE}


def test_json_alone_is_a_usage_error() -> None:
    with pytest.raises(click.UsageError):
        needs_dry_run(True, False)
    needs_dry_run(True, True)
    needs_dry_run(False, True)


@pytest.mark.parametrize("command", ["run", "night"])
def test_a_dry_run_with_json_says_an_error_as_the_one_json_object(
        command: str, tmp_path: Path, monkeypatch) -> None:
    """A script reading `--dry-run --json` gets a JSON object on stdout for bad input too,
    with the exit code a plain run would have (2), the faulty file named."""
    from harness.cli.main import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    r = CliRunner().invoke(cli, [command, "campaigns/missing.yaml", "--runs-dir", "runs",
                                 "--dry-run", "--json"])
    assert r.exit_code == 2, r.output
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2 and doc["command"] == command
    assert "campaigns/missing.yaml: no such campaign file" in doc["error"]
    assert list(tmp_path.rglob("*")) == [tmp_path / "runs"]  # nothing made

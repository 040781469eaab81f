"""`--dry-run` (harness/driver/dryrun.py, harness/cli/planprint.py): a night's dry run is the
real loop over a copy of its journal, so it names the slots the night runs, in the order
it runs them, and writes nothing; the JSON document's shape, the exit code when the
preflight would refuse, and hostile names printed inert."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from harness.base.reason import Reason
from harness.cli.planprint import needs_dry_run, say
from harness.config.loader import Loaded, load_campaign
from harness.driver.dryrun import (
    RUN_ID,
    SCHEMA,
    DryExecutor,
    DryRun,
    NightPick,
    PlannedControl,
    approval_line,
    night_walk,
    placeholders,
)
from harness.driver.night import runner
from harness.driver.night.runner import NightRunner, inputs_seal
from harness.driver.plan import LaunchRequest, Outcome
from harness.measure.nightfolder.journal import STOPPED, Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME, NIGHTS
from harness.measure.seal import SourceSeal
from harness.measure.ui import Reporter
from harness.measure.vector import LAUNCHER_PID, LAUNCHER_STARTED
from tests.campaign_runs import repo_campaign

HOSTILE = "ctl\x1b[31mred\x07\r\nfake: accepted"


def planned(name: str, *reasons: Reason) -> PlannedControl:
    return PlannedControl(name, 1, "cpu", "rehearsal", "sha256:" + "a" * 64,
                          ["docker", "run", "--name", f"harness-{name}-{RUN_ID}"], reasons)


def dry(*controls: PlannedControl, runs_dir: str = "/runs", holder: str | None = None
        ) -> DryRun:
    seal = SourceSeal("sha256:" + "b" * 64, {"input:campaign.yaml": "c" * 64})
    return DryRun("night", "camp", Path("/p/camp.yaml"), Path(runs_dir), Path("/l/gpu.lock"),
                  holder, seal, None, controls, ("a note",))


# a×4 (slots 0-3), b×2 (4-5), c×2 (6-7); c and b share a host: instances (6, 4), (7, 5).
CAMPAIGN = ("[{control: night-a, repeat: 4}, {control: night-b, repeat: 2}, "
            "{control: night-c, repeat: 2}]")
GROUPS = "retry: {interrupted: 1}\nsame_host:\n  - [night-c, night-b]\n"


def half_done_night(tmp_path: Path) -> tuple[Loaded, Path]:
    """A night a harness was killed in: slot 0 accepted, 1 interrupted with a retry left,
    2 interrupted twice (its budget spent), 3 deferred, 4 failed, 5 and 7 planned, 6 left
    `running` (recovered as interrupted, then retried)."""
    loaded, faults = load_campaign(repo_campaign(tmp_path, CAMPAIGN, GROUPS))
    assert faults == []
    night_dir = tmp_path / "runs" / NIGHTS / "c-20260101T000000Z"
    night_dir.mkdir(parents=True)
    with Journal.create(night_dir / JOURNAL_NAME, campaign="c",
                        campaign_file=str(loaded.campaign_file), plan=loaded.plan(),
                        seal=inputs_seal(loaded)) as j:
        rows = {r.plan_index: r for r in j.rows()}

        def ran(slot: int, status: str | None) -> None:
            row = j.mark_running(rows[slot], f"r{slot}", str(tmp_path / "gone" / f"r{slot}"))
            if status is not None:
                rows[slot] = j.finish(row, status, "ended so")
        ran(0, "accepted")
        ran(1, "interrupted")
        ran(2, "interrupted")
        j.mark_running(j.add_retry(rows[2]), "r2b", str(tmp_path / "gone" / "r2b"))
        j.mark_interrupted(j.by_run_id("r2b"), "ended so")
        j.mark_deferred(rows[3], "ENV-DOCTOR: the host was unfit")
        ran(4, "failed")
        ran(6, None)
    return loaded, night_dir


class Recording:
    """The real loop's executor here: each launch (slot, attempt) in order, each accepted."""

    window, together, per_job = 1, False, 1

    def __init__(self) -> None:
        self.launched: list[tuple[int | None, int]] = []

    def launch(self, request: LaunchRequest) -> Outcome:
        self.launched.append((request.plan_index, request.attempt))
        return Outcome.of(request.run_dir, "accepted")

    def start(self, requests: tuple[LaunchRequest, ...]) -> Outcome:
        [request] = requests
        return self.launch(request)

    def poll(self, flying: list) -> tuple[list, bool]:
        return [], False

    def pause(self, changed: bool, failures: int) -> None:
        return None

    def cancel_pending(self, flying: list) -> list:
        return []

    def preflight(self, control: str, runs_dir: Path) -> list[str]:
        return []

    def recover(self, requests: tuple[LaunchRequest, ...], job_id: str | None) -> list:
        return [(r, Outcome.of(r.run_dir, "interrupted", [STOPPED])) for r in requests]


def files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file with its bytes and mtime, but the -wal and -shm files SQLite makes for
    any reader of a WAL journal (`harness status` too)."""
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_the_dry_run_order_is_the_order_the_real_loop_runs(tmp_path: Path,
                                                          monkeypatch) -> None:
    loaded, night_dir = half_done_night(tmp_path)
    runs = tmp_path / "runs"
    monkeypatch.setattr(DryExecutor, "plan", lambda self, name: PlannedControl(
        name, 1, "cpu", "img", None, ["docker", "run"]))
    before = files(runs)
    dry = DryExecutor(loaded, runs)
    pick = night_walk(loaded, runs, None, False, dry)
    assert files(runs) == before, "the dry run wrote nothing"
    assert pick.night_dir == night_dir and pick.left_running == 1
    assert pick.slots == [1, 3, 7, 5, 6]  # retries, the deferred slot; a group in its order
    assert [c.control for c in dry.dry_run("night").controls] == ["night-a", "night-c",
                                                                  "night-b"]

    real_runs = tmp_path / "real"  # the real loop, over a copy of the same journal
    shutil.copytree(runs, real_runs)
    recording = Recording()
    monkeypatch.setattr(runner, "night_executor", lambda *a, **kw: recording)
    side = NightRunner(loaded, real_runs, Reporter(io.StringIO()), lock_timeout=None,
                       deadline=None)
    side.run(real_runs / NIGHTS / night_dir.name, True,
             SimpleNamespace(describe_as=lambda **kw: None))  # type: ignore[arg-type]
    assert [slot for slot, _ in recording.launched] == pick.slots
    assert [(r.plan_index, r.attempt) for r in dry.launched] == recording.launched


def test_a_new_night_walks_the_whole_plan_groups_together(tmp_path: Path,
                                                         monkeypatch) -> None:
    loaded, faults = load_campaign(repo_campaign(tmp_path, CAMPAIGN, GROUPS))
    assert faults == []
    monkeypatch.setattr(DryExecutor, "plan", lambda self, name: PlannedControl(
        name, 1, "cpu", "img", None, []))
    dry = DryExecutor(loaded, tmp_path / "runs")
    pick = night_walk(loaded, tmp_path / "runs", None, True, dry)
    assert pick.night_dir is None and pick.slots == [0, 1, 2, 3, 6, 4, 7, 5]
    assert [(c.control, c.repeats) for c in dry.dry_run("night").controls] == [
        ("night-a", 4), ("night-c", 2), ("night-b", 2)]
    assert not (tmp_path / "runs").exists()


def test_the_copy_of_an_older_journal_is_upgraded_in_memory_and_the_file_kept(
        tmp_path: Path) -> None:
    from tests.unit.test_journal_migrate import MIGRATED, old_journal, states

    path = old_journal(tmp_path)
    before = path.read_bytes()
    with Journal.open(path, readonly=True) as disk, disk.copy() as copy:
        assert states(copy) == MIGRATED
        slow = copy.by_run_id("slow-1")
        assert copy.add_rerun("slow-1", "a dry walk writes").rerun_of == slow.id
    assert path.read_bytes() == before


def test_night_pick_document_names_the_night_it_continues() -> None:
    assert NightPick(None, [0]).document() == {
        "continues": None, "slots": [0], "left_running": 0}
    doc = NightPick(Path("/r/nights/n-20260101T000000Z"), [1], 1).document()
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
                                       "timeout_s", "argv", "would_launch", "refused"}
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


def test_verbose_alone_is_a_usage_error() -> None:
    with pytest.raises(click.UsageError):
        needs_dry_run(True, False)
    needs_dry_run(True, True)
    needs_dry_run(False, True)
    needs_dry_run(False, False)


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

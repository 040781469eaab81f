"""Nights by name through the real CLI: a night id, a unique prefix, `latest`, a path (an
existing one wins); ambiguous references exit 2 with the candidates; `ls --nights`,
`show NIGHT`, `--runs-dir` on every command taking a run or a night, and `ls` saying
`running` for a folder whose harness is alive."""

from __future__ import annotations

import contextlib
import io
import json
import socket
from pathlib import Path

import psutil
import pytest
from bundle_helpers import make_run

from harness.cli.main import _run
from harness.measure.nightfolder.journal import Journal
from harness.readers.report.morning import write_night_summary

RUN_A = "echo-20261130T080100Z-0a0a0a0a"
RUN_B = "echo-20261201T080100Z-0b0b0b0b"
RERUN = "echo-20261201T090000Z-0c0c0c0c"
OLD, NEW = "kv-20261130T080000Z", "kv-20261201T080000Z"
OTHER = "kvx-20261202T080000Z"  # shares the prefix `kv` with both


def _night(runs: Path, name: str, run_id: str, state: str = "accepted") -> Path:
    night = runs / "nights" / name
    night.mkdir(parents=True)
    with Journal.create(night / "journal.sqlite", campaign=name.rsplit("-", 1)[0],
                        campaign_file="kv.yaml", plan=[("echo", 0)]) as j:
        row = j.mark_running(j.rows()[0], run_id, str(runs / run_id))
        j.finish(row, state, "why")
    return night


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runs dir with three nights; NEW's refused run was rerun and accepted."""
    runs = tmp_path / "gpu-runs"
    for rid in (RUN_A, RUN_B, RERUN):
        make_run(runs, rid)
    _night(runs, OLD, RUN_A)
    new = _night(runs, NEW, RUN_B, "refused")
    with Journal.open(new / "journal.sqlite") as j:
        row = j.mark_running(j.add_rerun(RUN_B, "reseated"), RERUN, str(runs / RERUN))
        j.finish(row, "accepted")
    (new / "ended.json").write_text('{"at": "2026-12-01T09:10:00Z", "why": "done"}')
    write_night_summary(new)
    _night(runs, OTHER, RUN_A)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_RUNS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no night lock: no night is running by it
    return runs


def harness(*argv: str) -> tuple[int, str]:
    """The real command line's exit code and what it printed (stdout and stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = _run(list(argv))
    return code, out.getvalue()


@pytest.mark.parametrize(("ref", "want"), [
    (NEW, NEW), ("kv-202612", NEW), ("kv-20261130", OLD), ("kvx", OTHER), ("latest", OTHER),
    ("@-1", NEW),
])
def test_report_names_a_night_by_id_prefix_or_age(runs: Path, ref: str, want: str) -> None:
    code, out = harness("report", ref, "--runs-dir", str(runs), "--format", "json")
    assert code == 0, out
    assert json.loads(out)["night"]["name"] == want


@pytest.mark.parametrize("ref", ["kv", "kv-2026"])
def test_an_ambiguous_night_is_exit_2_with_its_candidates(runs: Path, ref: str) -> None:
    code, out = harness("report", ref, "--runs-dir", str(runs))
    assert code == 2
    assert "ambiguous" in out and OLD in out and NEW in out


@pytest.mark.parametrize("ref", ["../x", "nights/../../etc", "kv\x1b[31m", "k\nv", "nope"])
def test_hostile_or_missing_night_names_are_exit_2_and_inert(runs: Path, ref: str) -> None:
    code, out = harness("report", ref, "--runs-dir", str(runs))
    assert code == 2
    assert "\x1b" not in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1  # a line break given is never one printed


def test_an_existing_path_wins_over_a_reference(runs: Path, tmp_path: Path) -> None:
    (tmp_path / "latest").symlink_to(runs / "nights" / OLD)  # a path named like a reference
    code, out = harness("report", "latest", "--runs-dir", str(runs), "--format", "json")
    assert code == 0 and json.loads(out)["night"]["name"] == "latest"
    code, out = harness("show", str(runs / "nights" / OLD), "--json")
    assert code == 0 and json.loads(out)["night"]["name"] == OLD


def test_show_of_a_night_prints_its_summary_never_run_unsealed(runs: Path) -> None:
    code, out = harness("show", NEW, "--runs-dir", str(runs))
    assert code == 0, out
    assert "RUN-UNSEALED" not in out and "1/1 control accepted" in out
    assert "superseded by" in out and "rerun of" in out  # the night's rerun, linked
    code, out = harness("show", "--json", "kv-20261201", "--runs-dir", str(runs))
    assert code == 0
    assert json.loads(out) == json.loads((runs / "nights" / NEW / "summary.json").read_text())


def test_a_reference_naming_a_run_and_a_night_is_ambiguous(runs: Path) -> None:
    code, out = harness("show", "ech", "--runs-dir", str(runs))  # runs only: `echo-…`
    assert code == 2 and "3 runs match" in out
    code, out = harness("show", "latest", "--runs-dir", str(runs), "--json")  # a run
    assert code == 0 and json.loads(out)["run_id"] == RERUN


def test_rerun_failed_takes_a_night_reference(runs: Path) -> None:
    code, out = harness("rerun", "--failed", "latest", "--reason", "x", "--dry-run",
                        "--runs-dir", str(runs))
    assert "Path" not in out and "does not exist" not in out
    code, out = harness("rerun", "--failed", "nope", "--reason", "x", "--dry-run",
                        "--runs-dir", str(runs))
    assert code == 2 and "no night 'nope'" in out, out


@pytest.mark.parametrize("argv", [
    ["show", RUN_A], ["verify", RUN_A], ["verify", NEW], ["refinalize", RUN_A, "--json"],
    ["report", NEW], ["status"], ["ls"], ["ls", "--nights"],
    ["bundle", "export", NEW, "-o", "out.tar"], ["diff", RUN_A, RUN_B],
], ids=lambda a: "-".join(a[:2]))
def test_every_command_taking_a_run_or_night_takes_runs_dir(runs: Path, argv: list[str]) -> None:
    _, out = harness(*argv, "--runs-dir", str(runs))
    assert "No such option" not in out and "give --runs-dir" not in out
    assert "no run" not in out and "no night" not in out


def test_ls_nights_lists_state_controls_and_reruns(runs: Path) -> None:
    code, out = harness("ls", "--nights", "--runs-dir", str(runs))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NIGHT", "ID", "CAMPAIGN"]
    assert [line.split()[0] for line in lines[1:]] == [OTHER, NEW, OLD]
    new = lines[2].split()
    assert new[1:3] == ["kv", "done"] and "1/1" in new and new[-1] == "1"  # 1 rerun
    assert lines[3].split()[2] == "interrupted"  # neither ended nor running
    code, out = harness("ls", "--nights", "--json", "-n", "2", "--campaign", "kv",
                        "--runs-dir", str(runs))
    rows = json.loads(out)
    assert [r["night_id"] for r in rows] == [NEW, OLD]
    assert rows[0]["accepted"] == 1 and rows[0]["controls"] == 1 and rows[0]["reruns"] == 1
    assert rows[1]["controls"] is None  # no summary.json written
    code, out = harness("ls", "--nights", "-q", "--runs-dir", str(runs))
    assert out.split() == [OTHER, NEW, OLD]
    code, out = harness("ls", "--nights", "--control", "echo", "--runs-dir", str(runs))
    assert code == 2


def _open_run(runs: Path, run_id: str, pid: int, created: float) -> None:
    folder = runs / run_id
    folder.mkdir()
    (folder / "harness.json").write_text(json.dumps(
        {"pid": pid, "create_time": created, "host": socket.gethostname()}))


def test_ls_says_running_while_the_launcher_lives_unsealed_after(runs: Path) -> None:
    me = psutil.Process()
    _open_run(runs, "echo-20261203T000000Z-0d0d0d0d", me.pid, me.create_time())
    _open_run(runs, "echo-20261203T000001Z-0e0e0e0e", me.pid, me.create_time() - 50)  # reused
    _, out = harness("ls", "--json", "--runs-dir", str(runs))
    status = {r["run_id"]: r["status"] for r in json.loads(out)}
    assert status["echo-20261203T000000Z-0d0d0d0d"] == "running"
    assert status["echo-20261203T000001Z-0e0e0e0e"] == "unsealed"
    # a night whose journal row is written by a live harness is running
    night = _night(runs, "kv-20261203T000000Z", RUN_A)
    with Journal.open(night / "journal.sqlite") as j:
        j.add_rerun(RUN_A, "again")
        j.mark_running(j.rows()[-1], "echo-20261203T000000Z-0d0d0d0d",
                       str(runs / "echo-20261203T000000Z-0d0d0d0d"))
    _, out = harness("ls", "--nights", "--json", "-n", "1", "--runs-dir", str(runs))
    assert json.loads(out)[0]["state"] == "running"

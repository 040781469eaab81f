"""What the operator reads besides the runs: `--json` results of gates, approve, schedule
and bundle export; `status` when systemd cannot be asked; plot titles; the performance
log's folder. Each through the real command line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import _run as harness_cli
from harness.measure import perflog
from harness.readers.report.plots import percent, spread_text
from tests.approval_helpers import one_control_project
from tests.unit.bundle_helpers import make_run

REPO = Path(__file__).resolve().parents[2]


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1, out  # one object, nothing else on stdout
    return json.loads(out)


def test_gates_and_approve_say_their_result_as_one_json_object(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    campaign = one_control_project(root, monkeypatch, "gates:\n  - name: unit\n"
                                   "    run: [\"true\"]\n    timeout: 30\n")
    assert harness_cli(["gates", str(campaign), "--runs-dir", str(root / "runs"), "--json"]) == 0
    doc = _json(capsys)
    assert doc["ok"] is True and doc["exit_code"] == 0 and doc["git"]["clean"] is True
    assert [g["name"] for g in doc["gates"]] == ["unit"] and doc["gates"][0]["passed"]
    assert Path(doc["record"]).is_dir() and doc["verdict"] == "gates passed"
    record = doc["record"]
    assert harness_cli(["approve", str(campaign), "--gates", record, "--reviewer", "rev@x",
                        "--json"]) == 0
    approval = _json(capsys)
    assert approval["ok"] and approval["exit_code"] == 0 and approval["reviewer"] == "rev@x"
    assert approval["source_seal"] == doc["source_seal"] and approval["signed"] is False
    assert Path(approval["approval"]).is_file()
    # a second approval of the same seal is refused (exit 2): still one JSON object
    assert harness_cli(["approve", str(campaign), "--gates", record, "--json"]) == 2
    again = _json(capsys)
    assert again["ok"] is False and again["exit_code"] == 2 and again["error"]


def test_a_failed_gate_is_exit_1_in_json_too(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    campaign = one_control_project(root, monkeypatch, "gates:\n  - name: unit\n"
                                   "    run: [\"false\"]\n    timeout: 30\n")
    assert harness_cli(["gates", str(campaign), "--runs-dir", str(root / "runs"), "--json"]) == 1
    doc = _json(capsys)
    assert doc["ok"] is False and doc["exit_code"] == 1 and not doc["gates"][0]["passed"]


def test_schedule_json_holds_the_units_and_installs_only_when_asked(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    campaign = REPO / "campaigns" / "rehearsal.yaml"
    argv = ["schedule", str(campaign), "--on-calendar", "*-*-* 02:00", "--until", "06:00",
            "--runs-dir", str(tmp_path / "runs"), "--json"]
    assert harness_cli(argv) == 0
    doc = _json(capsys)
    assert doc["ok"] and doc["installed"] is False and doc["unit"] == "harness-night-rehearsal"
    assert "OnCalendar=*-*-* 02:00" in doc["timer"] and "ExecStart=" in doc["service"]
    assert not Path(doc["timer_path"]).exists()
    assert harness_cli([*argv, "--install"]) == 0
    assert Path(_json(capsys)["timer_path"]).read_text() == doc["timer"]
    assert harness_cli([*argv, "--install"]) == 2  # installed already, no --force
    assert _json(capsys)["exit_code"] == 2


def test_bundle_export_json_gives_the_digest_or_each_problem(tmp_path, capsys):
    run = make_run(tmp_path / "runs")
    out = tmp_path / "b.tar.gz"
    assert harness_cli(["bundle", "export", str(run), "-o", str(out), "--json"]) == 0
    doc = _json(capsys)
    assert doc["ok"] and doc["runs"] == [run.name] and doc["problems"] == []
    assert doc["sha256"] == subprocess.run(["sha256sum", str(out)], capture_output=True,
                                           text=True, check=True).stdout.split()[0]
    (run / "logs" / "stdout.log").write_text("changed\n")
    assert harness_cli(["bundle", "export", str(run), "-o", str(tmp_path / "c.tar"),
                        "--json"]) == 1
    bad = _json(capsys)
    assert bad["exit_code"] == 1 and not bad["ok"]
    assert any("stdout.log" in p for p in bad["problems"])


def test_status_says_timers_are_unknown_when_the_user_bus_is_unreachable(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    systemctl = fake / "systemctl"
    systemctl.write_text("#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\n"
                         "exit 1\n")
    systemctl.chmod(0o755)
    (tmp_path / "runs").mkdir()
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    r = subprocess.run([sys.executable, "-m", "harness", "status", "--runs-dir",
                        str(tmp_path / "runs"), "--lock", str(tmp_path / "gpu.lock")],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert ("timers: unknown (systemd user bus unreachable: Failed to connect to bus: "
            "No medium found)") in r.stdout.splitlines()


@pytest.mark.parametrize(("values", "text"), [
    ([0.5, 100.0], "0.5–100 s, spread 100 %"),
    ([3.01, 3.05], "3.01–3.05 s, spread 1.3 %"),
    ([2.0, 2.0], "2–2 s, spread 0 %"),
    ([1.0, 1.0000001], "1–1 s, spread < 0.01 %"),
])
def test_plot_titles_never_show_an_exponent(values: list[float], text: str) -> None:
    assert spread_text(values, "s") == text
    assert "e+" not in percent(1e6) and "e-" not in percent(1e-9)


def test_the_performance_log_folder_holds_only_the_logs(tmp_path: Path) -> None:
    line = {"sealed": "2026-12-01T00:00:00Z", "campaign": "camp", "control": "c",
            "run_id": "r", "attempt": 1, "status": "accepted", "metric": "duration_s",
            "value": 1.5, "unit": "s"}
    for _ in range(2):
        perflog.append(tmp_path, "camp", [line])
    folder = tmp_path / perflog.PERFLOG_DIR
    assert sorted(p.name for p in folder.iterdir()) == ["camp.csv", "camp.jsonl"]
    assert stat.S_IMODE((folder / "camp.csv").stat().st_mode) & 0o777 == 0o644 & ~_umask()
    assert (folder / "camp.csv").read_text().count("sealed,campaign") == 1


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old

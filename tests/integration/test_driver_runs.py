"""One campaign driver for `harness run` and `harness night`, against the real engine: the
campaign's stop policy stops both the same way, and a night journals a time-out as
`timed-out` (the run's own word), not as `failed`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME

OK = 'command: [python3, -c, "print(1)"]\n'
BOOM = 'command: [python3, -c, "import sys; sys.exit(7)"]\n'
SLOW = """\
command: [python3, -c, "import time; time.sleep(120)"]
timeout: 3
stop_grace: 1
"""


def controls_run(project) -> list[str]:
    out = []
    for p in project.run_dirs():
        if (p / "run.json").is_file():
            rec = project.record(p)
            out.append((rec["control"]["name"], rec["status"]))
    return sorted(out)


def events(stderr: str, kind: str) -> list[dict]:
    found = []
    for line in stderr.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("event") == kind:
            found.append(doc)
    return found


def test_run_stops_on_failure_as_the_campaign_says(project):
    for name, body in (("ok", OK), ("boom", BOOM), ("never", OK)):
        project.control(name, body)
    camp = project.campaign("stopcamp", ["ok", "boom", "never"], "stop_policy: stop-on-failure\n")
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs), "--json-lines")
    assert r.returncode == 1, r.stderr
    assert controls_run(project) == [("boom", "failed"), ("ok", "accepted")]
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == [
        "accepted", "failed", "not executed"]
    assert r.stdout.splitlines()[-1].startswith(
        "not executed: never: stop_policy stop-on-failure after boom was failed")
    [stop] = events(r.stderr, "stop-policy")
    assert (stop["policy"], stop["status"]) == ("stop-on-failure", "failed")


def test_night_stops_on_refusal_and_journals_a_time_out_in_the_runs_words(project):
    for name, body in (("slow", SLOW), ("never", OK)):
        project.control(name, body)
    camp = project.campaign("stopnight", ["slow", "never"], "stop_policy: stop-on-refusal\n")
    t0 = time.monotonic()
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs), "--json-lines")
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - t0 < 120
    assert controls_run(project) == [("slow", "timed-out")]
    [night_dir] = sorted(Path(project.runs / "nights").iterdir())
    assert f"night: {night_dir} (stop-policy, exit code 1)" in r.stdout
    assert json.loads((night_dir / "ended.json").read_text())["why"] == "stop-policy"
    with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
        rows = [(row.control, row.state) for row in j.rows()]
        slow = j.rows()[0]
    assert rows == [("slow", "timed-out"), ("never", "planned")]
    assert not slow.reason.startswith("timed-out:")
    summary = json.loads((night_dir / "summary.json").read_text())
    assert summary["counts"] == {"planned": 1, "timed-out": 1}


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _by_control(project) -> dict[str, Path]:
    return {project.record(p)["control"]["name"]: p for p in project.run_dirs()}


def test_the_next_control_takes_the_host_snapshot_and_seal_the_run_before_ended_with(project):
    for name in ("first", "second"):
        project.control(name, OK)
    camp = project.campaign("carry", ["first", "second"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    runs = _by_control(project)
    first, second = runs["first"], runs["second"]
    assert _json(first / "preflight.json")["carried"] is None  # the first measures its own
    carried = _json(second / "preflight.json")["carried"]
    assert carried["from_run"] == first.name
    assert carried["source_seal"] is True and carried["host_before"] is True
    # the very snapshot the first run ended with, not one taken again
    assert _json(second / "host-before.json") == _json(first / "host-after.json")
    assert (_json(second / "host-before.json")["taken_at"]
            == _json(first / "host-after.json")["taken_at"])
    assert project.record(second)["seal"] == project.record(first)["seal"]
    assert project.harness("verify", str(second)).returncode == 0


def test_an_input_edited_between_two_controls_refuses_the_next_one(project, tmp_path):
    """The carried seal is older than the next control's launch: an input changed in
    between is a change across that run (SEAL-CHANGED), not a new "before" that hides
    that the campaign was loaded before the edit."""
    for name in ("first", "second"):
        project.control(name, OK)
    camp = project.campaign("edited", ["first", "second"])
    marker = tmp_path / "sealing"
    env = {**os.environ, "HARNESS_FAULTPOINT": "sealing:2",
           "HARNESS_FAULTPOINT_MARKER": str(marker)}
    p = project.popen("run", str(camp), "--runs-dir", str(project.runs), env=env)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the first run never reached its seal"
    second_file = project.root / "controls" / "second.yaml"
    second_file.write_text(second_file.read_text() + "# edited while the first sealed\n")
    _out, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    runs = _by_control(project)
    assert project.record(runs["first"])["status"] == "accepted"
    second = project.record(runs["second"])
    assert second["status"] == "refused" and "SEAL-CHANGED" in second["rules"], second
    assert _json(runs["second"] / "preflight.json")["carried"]["from_run"] == runs["first"].name

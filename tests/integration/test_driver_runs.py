"""One campaign driver for `harness run` and `harness night`, against the real engine: the
campaign's stop policy stops both the same way, and a night journals a time-out as
`timed-out` (the run's own word), not as `failed`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.night.journal import JOURNAL_NAME, Journal

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
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["accepted", "failed"]
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
    assert f"night: {night_dir} (stop-policy)" in r.stdout
    assert json.loads((night_dir / "ended.json").read_text())["why"] == "stop-policy"
    with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
        rows = [(row.control, row.state) for row in j.rows()]
        slow = j.rows()[0]
    assert rows == [("slow", "timed-out"), ("never", "planned")]
    assert not slow.reason.startswith("timed-out:")
    summary = json.loads((night_dir / "summary.json").read_text())
    assert summary["counts"] == {"planned": 1, "timed-out": 1}

"""A campaign stopped by its stop policy names the controls it never ran, with why, against
the real engine: `harness run`'s end lines, and as a night its summary.md, summary.json and
the hook's payload."""

from __future__ import annotations

import json
import sys

import pytest

pytestmark = pytest.mark.docker

OK = 'command: [python3, -c, "print(1)"]\n'
REFUSED = """\
command: [python3, -c, "print(1)"]
post_steps:
  - {name: never-content, run: ["false"]}
"""
KEEP_STDIN = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_bytes(sys.stdin.buffer.read())\n"


def test_a_stopped_campaign_names_each_control_not_executed_and_why(
        project, cleanup_containers) -> None:
    project.control("first", REFUSED)
    project.control("second", OK)
    project.control("third", OK)
    script, out = project.root / "keep_stdin.py", project.root / "payload.json"
    script.write_text(KEEP_STDIN)
    camp = project.campaign("leftcamp", ["first", "second", "third"], f"""\
        stop_policy: stop-on-refusal
        hook:
          command: [{sys.executable}, {script}, {out}]
          timeout: 10s
        """)
    cleanup_containers.append(f"org.harness.lock={project.lock}")

    r = project.harness("run", str(camp), "--runs-dir", str(project.runs), "--json-lines")
    assert r.returncode == 1, r.stdout + r.stderr
    [first] = project.run_dirs()
    rec = project.record(first)
    assert rec["status"] == "refused" and rec["rules"], rec
    why = f"stop_policy stop-on-refusal after first was refused ({', '.join(rec['rules'])})"
    assert r.stdout.splitlines() == [f"refused: {first}", f"not executed: second: {why}",
                                     f"not executed: third: {why}"]

    r = project.harness("night", str(camp), "--runs-dir", str(project.runs), "--json-lines")
    assert r.returncode == 1, r.stdout + r.stderr
    [night] = sorted((project.runs / "nights").iterdir())
    run = next(p for p in project.run_dirs() if p != first and (p / "run.json").is_file())
    why = f"stop_policy stop-on-refusal after first was refused " \
          f"({', '.join(project.record(run)['rules'])})"
    assert f"not executed: second: {why}" in r.stdout.splitlines()
    assert f"not executed: third: {why}" in r.stdout.splitlines()
    summary = json.loads((night / "summary.json").read_text())
    left = [(e["control"], e["why"]) for e in summary["not_executed"]]
    assert left == [("second", why), ("third", why)]
    md = (night / "summary.md").read_text()
    assert "## Not executed" in md and "- second: stop\\_policy stop-on-refusal after first" in md
    payload = json.loads(out.read_bytes())
    assert payload["not_executed"] == summary["not_executed"]

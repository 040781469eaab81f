"""`harness diff` of real runs names the figures a regression is called on, changes first:
two runs of one control, the second sleeping ~2.5 s where the first slept ~0.2 s (the
sleep read from a read-write mount, so the control and its seal are the same), and two
nights of a one-control campaign compared per control."""

from __future__ import annotations

import json
from pathlib import Path

CONTROL = """\
command: [python3, -c, "import time; time.sleep(float(open('/state/sleep').read()))"]
mounts:
  - {source: ../state, target: /state, read_only: false}
timeout: 1m
"""


def napping(project) -> tuple[Path, Path]:
    """The campaign, and the file its control's sleep is read from."""
    state = project.root / "state"
    state.mkdir()
    state.chmod(0o777)
    sleep = state / "sleep"
    sleep.write_text("0.2")
    sleep.chmod(0o666)
    project.control("nap", CONTROL)
    return project.campaign("napping", ["nap"]), sleep


def test_diff_of_a_fast_and_a_slow_run_lists_duration_first(project, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    camp, sleep = napping(project)
    for seconds in ("0.2", "2.5"):
        sleep.write_text(seconds)
        r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
        assert r.returncode == 0, r.stdout + r.stderr
    fast, slow = project.sealed_in_order()
    d = project.harness("diff", str(fast), str(slow))
    assert d.returncode == 0, d.stderr
    lines = d.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("figures: "))
    assert head < next(i for i, x in enumerate(lines) if x.startswith("status: "))
    first = lines[head + 1]
    assert first.startswith("    duration_s ") and first.endswith(", worse)"), lines
    before, after = (float(x.split()[0]) for x in first.split("duration_s ")[1].split(" -> "))
    assert before < 1.5 < 2.5 <= after, first
    doc = json.loads(project.harness("diff", str(fast), str(slow), "--json").stdout)
    [duration] = [f for f in doc["topics"]["figures"]["figures"] if f["figure"] == "duration_s"]
    assert doc["topics"]["figures"]["figures"][0] == duration
    assert duration["change"] == "moved" and duration["unit"] == "s"
    assert duration["a"] < 1.5 < 2.5 <= duration["b"] and duration["way"] == "worse"
    assert doc["differs"][0] == "figures"
    assert project.harness("diff", str(fast), str(slow), "--exit-code").returncode == 1


def test_two_nights_are_compared_per_control(project, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    camp, sleep = napping(project)
    for seconds in ("0.2", "2.5"):
        sleep.write_text(seconds)
        r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
        assert r.returncode == 0, r.stdout + r.stderr
    first, second = sorted((project.runs / "nights").iterdir())
    d = project.harness("diff", str(first), str(second))
    assert d.returncode == 0, d.stdout + d.stderr
    lines = d.stdout.splitlines()
    assert "controls that differ: nap" in lines, lines
    at = next(i for i, x in enumerate(lines) if x.startswith("nap: nap-"))
    assert lines[at].endswith("(accepted)") and lines[at + 1] == "    status: same accepted"
    assert lines[at + 3].startswith("        duration_s "), lines
    assert "[RUN-UNSEALED]" not in d.stdout + d.stderr
    assert project.harness("diff", str(first), str(second), "--exit-code").returncode == 1
    doc = json.loads(project.harness("diff", str(first), str(second), "--json").stdout)
    assert doc["schema"] == "harness.diff-nights/v1" and list(doc["controls"]) == ["nap"]
    assert doc["controls"]["nap"]["differs"] == ["figures"]
    [run] = [p for p in project.run_dirs() if p.name != "nights"][:1]
    mixed = project.harness("diff", str(first), str(run))
    assert mixed.returncode == 2 and "is a night folder and" in mixed.stderr

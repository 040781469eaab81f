"""A campaign named by its absolute path from an unrelated folder: `harness run`, `gates`,
`night`, `report` and `rerun` read and write the runs dir of the campaign project's
harness.toml, exactly as from the project root, and create nothing in the current folder
(whose own harness.toml has no say)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_a_campaign_works_the_same_from_any_folder(project, tmp_path_factory) -> None:
    project.control("hello", 'command: [python3, -c, "print(1)"]\n')
    camp = project.campaign("camp", ["hello"],
                            "gates:\n  - {name: ok, run: [/bin/true], timeout: 1m}\n")
    (project.root / "harness.toml").write_text('runs_dir = "evidence"\n')
    subprocess.run(["git", "init", "-q", str(project.root)], check=True)  # its checkout
    runs = project.root / "evidence"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "harness.toml").write_text('runs_dir = "not-here"\n')  # a decoy
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_RUNS_DIR"}

    def harness(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                              text=True, timeout=180, cwd=elsewhere, env=env)

    r = harness("run", str(camp), "--no-json-lines")
    assert r.returncode == 0, r.stdout + r.stderr
    [run] = [p for p in runs.iterdir() if p.name.startswith("hello-")]
    assert f"accepted: {run}" in r.stdout

    g = harness("gates", str(camp))
    assert g.returncode == 0, g.stdout + g.stderr
    [record] = (runs / "gates").iterdir()
    assert f"gates passed: {record} " in g.stdout

    n = harness("night", str(camp), "--no-json-lines")
    assert n.returncode == 0, n.stdout + n.stderr
    [night] = (runs / "nights").iterdir()
    rep = harness("report", str(camp), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["night"]["dir"] == str(night)

    again = harness("rerun", str(run), "--reason", "from elsewhere", "--no-json-lines")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"accepted: {runs}/hello-" in again.stdout  # beside the original

    assert sorted(p.name for p in elsewhere.iterdir()) == ["harness.toml"]
    assert not (project.root / "gpu-runs").exists()

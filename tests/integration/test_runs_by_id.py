"""Runs found by id, against real runs: `harness ls`, `show`/`diff`/`verify` by id, prefix,
hex tail and `latest`, from another folder with HARNESS_RUNS_DIR or a harness.toml; a
night folder verified in one go; a missing runs dir is exit 2, never an empty answer; a
night folder or bundle where a campaign or run belongs is named for what it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.base.states import STATUSES

UNSEALED_ID = "ok-20991231T000000Z-00000000"  # a folder a killed harness could have left


def _env(runs: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_RUNS_DIR"}
    if runs is not None:
        env["HARNESS_RUNS_DIR"] = str(runs)
    return env


def _make_runs(project) -> tuple[Path, Path]:
    project.control("ok", 'command: [python3, -c, "print(1)"]\n')
    project.control("bad", 'command: [python3, -c, "import sys; sys.exit(7)"]\n')
    camp = project.campaign("camp", ["ok", "bad"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode in (0, 1), r.stderr
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs), "--no-json-lines")
    assert r.returncode in (0, 1), r.stderr
    [night] = list((project.runs / "nights").iterdir())
    return camp, night


def test_runs_are_listed_and_found_by_id_from_anywhere(project, tmp_path: Path) -> None:
    camp, night = _make_runs(project)
    (project.runs / UNSEALED_ID).mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def harness(*args: str, runs: Path | None = project.runs, cwd: Path = elsewhere):
        return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                              text=True, timeout=180, cwd=cwd, env=_env(runs))

    r = harness("ls", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows[0]["run_id"] == UNSEALED_ID  # newest first, never hidden
    assert rows[0]["status"] == "unsealed"
    sealed = rows[1:]
    assert len(sealed) == 4 and all(row["status"] in STATUSES for row in sealed)
    assert all(row["campaign"] == "camp" for row in sealed)
    ids = [row["run_id"] for row in sealed]
    table = harness("ls").stdout.splitlines()
    assert table[0].split()[:4] == ["RUN", "ID", "CONTROL", "CAMPAIGN"] and len(table) == 6
    assert harness("ls", "-q", "--control", "bad").stdout.split() == [
        i for i in ids if i.startswith("bad-")]
    assert harness("ls", "-q", "--status", "unsealed").stdout.split() == [UNSEALED_ID]

    newest, oldest = ids[0], ids[-1]
    shown = harness("show", newest[-8:])  # the hex tail, as docker takes an id prefix
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(newest)
    assert harness("show", "latest").returncode == 1  # the unsealed folder: not shown as fact
    assert harness("show", "@-1").stdout.startswith(newest)
    d = harness("diff", newest[:-4], oldest, "--json")
    assert d.returncode == 0, d.stderr
    assert {json.loads(d.stdout)["a"]["run_id"], json.loads(d.stdout)["b"]["run_id"]} == {
        newest, oldest}

    ambiguous = harness("show", "ok")
    assert ambiguous.returncode == 2
    assert "ambiguous" in ambiguous.stderr and "3 runs match" in ambiguous.stderr
    missing = harness("show", "okay-2099")
    assert missing.returncode == 2 and "no run 'okay-2099'" in missing.stderr

    v = harness("verify", str(night))
    assert v.returncode == 0, v.stdout + v.stderr
    assert sum(line.startswith("OK: ") for line in v.stdout.splitlines()) == 2
    assert "2 run(s), all intact" in v.stdout

    gone = harness("status", "--runs-dir", "/nonexistent")
    assert gone.returncode == 2
    assert "no such runs dir: /nonexistent (from --runs-dir)" in gone.stderr
    gone = harness("ls", runs=tmp_path / "nope")
    assert gone.returncode == 2 and "(from HARNESS_RUNS_DIR)" in gone.stderr
    assert harness("ls", runs=None).returncode == 2  # no gpu-runs here: exit 2, not empty

    (project.root / ".git").mkdir()  # the project's root: the config search stops there
    (project.root / "harness.toml").write_text('runs_dir = "runs"\n')
    sub = project.root / "campaigns"
    assert harness("ls", "-q", runs=None, cwd=sub).stdout.split() == [UNSEALED_ID, *ids]

    run_night = harness("run", str(night))
    assert run_night.returncode == 2 and "harness rerun --failed" in run_night.stderr
    rerun_night = harness("rerun", str(night), "--reason", "x")
    assert rerun_night.returncode == 2 and "that is a night folder" in rerun_night.stderr
    bundle = tmp_path / "b.tar.gz"
    bundle.write_bytes(b"")
    v = harness("verify", str(bundle))
    assert v.returncode == 2 and "harness bundle verify" in v.stderr
    assert camp.exists()

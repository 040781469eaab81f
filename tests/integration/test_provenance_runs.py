"""A run records the project's git commit and whether its tree was clean (real engine)."""

from __future__ import annotations

import json
import subprocess

from harness.readers.report.nights import load_run
from harness.readers.report.summary import build_summary, render_markdown

QUICK = """\
command: [python3, -c, "print('ok')"]
timeout: 2m
"""


def _git(root, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                           "-c", "commit.gpgsign=false", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_run_records_a_clean_then_a_dirty_tree(project):
    project.control("quick", QUICK)
    camp = project.campaign("camp", ["quick"])
    (project.root / ".gitignore").write_text("runs/\nlocks/\n")
    _git(project.root, "init", "-q")
    _git(project.root, "add", "-A")
    _git(project.root, "commit", "-q", "-m", "campaign")
    head = _git(project.root, "rev-parse", "HEAD")

    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [clean] = project.run_dirs()
    prov = project.record(clean)["provenance"]
    assert prov == {"commit": head, "dirty": False, "changed": [], "changed_total": 0,
                    "error": None}
    assert json.loads((clean / "preflight.json").read_text())["provenance"] == prov
    shown = project.harness("show", str(clean))
    assert shown.returncode == 0 and f"{head} (clean)" in shown.stdout

    (project.root / "notes.txt").write_text("an uncommitted change\n")
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [dirty] = [d for d in project.run_dirs() if d != clean]
    prov = project.record(dirty)["provenance"]
    assert prov["commit"] == head and prov["dirty"] is True
    assert prov["changed"] == ["notes.txt"] and prov["changed_total"] == 1
    shown = project.harness("show", str(dirty))
    assert f"{head} dirty: 1 changed (notes.txt)" in shown.stdout, shown.stdout
    assert project.harness("verify", str(dirty)).returncode == 0

    summary = build_summary({"name": "n"}, [load_run(clean), load_run(dirty)])
    assert [e["git_dirty"] for e in summary["runs"]] == [False, True]
    assert "dirty: 1 changed (notes.txt)" in render_markdown(summary)


def test_a_project_that_is_not_a_repository_says_why(project):
    project.control("quick", QUICK)
    camp = project.campaign("camp", ["quick"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [run] = project.run_dirs()
    prov = project.record(run)["provenance"]
    assert prov["commit"] is None and prov["dirty"] is None
    assert "not a git work tree" in prov["error"]
    assert "state unknown: not a git work tree" in project.harness("show", str(run)).stdout

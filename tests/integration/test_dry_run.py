"""`--dry-run` of run, night and rerun with the real engine and the rehearsal image: it
creates nothing under the runs dir, takes no lock, prints the seal the real run then
records, and exits 0 (would launch) or 1 (would refuse); a night's dry run names what its
resume would run, and the real resume runs exactly that."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.base.gpuslot import GpuSlot
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.runfolder import runjson
from tests.integration.test_night_runs import SLEEP, running_container, runs

QUICK = """\
command: [python3, -c, "print('ok')"]
timeout: 1m
"""


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and mtime: what "created nothing" compares.
    A killed night's journal keeps its `-shm` file, SQLite's shared-memory index of the
    write-ahead log, which every reader maps and touches (`harness status` too): only
    its existence is compared; the journal and its log are compared in full."""
    if not root.exists():
        return {}
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = ((0, 0) if name.endswith("-shm")
                                             else (st.st_size, st.st_mtime_ns))
    return out


def locks(project) -> list[Path]:
    """The GPU lock, its night lock and holder records: a dry run makes none of them."""
    return sorted(project.lock.parent.iterdir())


def dry(project, *args: str) -> tuple[int, dict]:
    r = project.harness(*args, "--dry-run", "--json")
    assert r.stderr == "" or "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)


def test_run_dry_run_creates_nothing_and_prints_the_seal_the_run_records(project,
                                                                           cleanup_containers):
    project.control("da", QUICK)
    project.control("db", QUICK)
    camp = project.campaign("drycamp", ["da", "db"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert not project.runs.exists() and locks(project) == []
    [seal_line] = [line for line in r.stdout.splitlines() if line.startswith("seal ")]
    assert r.stdout.splitlines()[-1] == "would launch 2 controls (exit 0)"
    code, doc = dry(project, "run", str(camp), "--runs-dir", str(project.runs))
    assert code == 0 and doc["exit_code"] == 0 and doc["would_launch"] is True
    assert [c["control"] for c in doc["controls"]] == ["da", "db"]
    assert doc["controls"][0]["image_id"] == project.image_id
    assert doc["controls"][0]["argv"][:3] == ["docker", "run", "--pull=never"]
    assert doc["lock"] == {"path": str(project.lock), "free": True, "holder": None}
    assert doc["seal"]["digest"] in seal_line
    assert not project.runs.exists() and locks(project) == []

    real = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert real.returncode == 0, real.stderr
    seals = {runjson.read(p).seal for p in runs(project)}
    assert seals == {doc["seal"]["digest"]}


def test_a_refused_dry_run_exits_one_like_the_run(project):
    project.control("dc", QUICK)
    camp = project.campaign("refcamp", ["dc"], "require_approval: true\n")
    code, doc = dry(project, "run", str(camp), "--runs-dir", str(project.runs))
    assert code == 1 and doc["would_launch"] is False and doc["exit_code"] == 1
    [ctl] = doc["controls"]
    assert "SEAL-NOT-APPROVED" in [r["rule"] for r in ctl["refused"]]
    night_code, night_doc = dry(project, "night", str(camp), "--runs-dir", str(project.runs))
    assert night_code == 1 and night_doc["controls"][0]["refused"] == ctl["refused"]
    assert not project.runs.exists() and locks(project) == []
    real = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert real.returncode == 1 and "SEAL-NOT-APPROVED" in real.stderr
    assert project.run_dirs() == []


def test_run_night_and_rerun_say_their_result_as_one_json_object(project, cleanup_containers):
    """--json without --dry-run: stdout is one object (runs, status, exit code), the plain
    lines go to stderr; `-v` alone is still a usage error."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("dd", QUICK)
    camp = project.campaign("usecamp", ["dd"])
    r = project.harness("night", str(camp), "-v")
    assert r.returncode == 2 and "-v/--verbose goes with --dry-run" in r.stderr
    code, doc = dry(project, "night", str(camp), "--runs-dir", str(project.runs),
                    "--night", "x", "--new")
    assert code == 2 and doc["ok"] is False and "exclude each other" in doc["error"]
    assert not project.runs.exists() and locks(project) == []
    runs = ["--runs-dir", str(project.runs)]
    ran = project.harness("run", str(camp), *runs, "--json")
    doc = json.loads(ran.stdout)
    assert ran.returncode == doc["exit_code"] == 0 and doc["ok"] is True
    [one] = doc["runs"]
    assert one["status"] == "accepted" and Path(one["path"]).is_dir()
    assert f"accepted: {one['path']}" in ran.stderr
    night = project.harness("night", str(camp), *runs, "--json")
    doc = json.loads(night.stdout)
    assert night.returncode == doc["exit_code"] == 0 and doc["why"] == "done"
    assert Path(doc["night"]).is_dir() and [r["status"] for r in doc["runs"]] == ["accepted"]
    assert any(p.endswith("summary.json") for p in doc["summary"])
    again = project.harness("rerun", one["run_id"], *runs, "--reason", "json", "--json")
    doc = json.loads(again.stdout)
    assert again.returncode == doc["exit_code"] == 0
    assert doc["runs"][0]["rerun_of"] == one["run_id"] and doc["runs"][0]["status"] == "accepted"
    bad = project.harness("run", str(project.root / "nope.yaml"), *runs, "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["ok"] is False


def test_night_dry_run_names_what_the_resume_runs(project, cleanup_containers):
    for name in ("na", "nb", "nc"):
        project.control(name, SLEEP.format(s=2))
    camp = project.campaign("drynight", ["na", "nb", "nc"], "retry: {interrupted: 1}\n")
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    code, fresh = dry(project, "night", str(camp), "--runs-dir", str(project.runs))
    assert code == 0 and fresh["night"] == {"continues": None, "slots": [0, 1, 2],
                                            "left_running": 0}
    assert not project.runs.exists() and locks(project) == []

    night = project.popen("night", str(camp), "--runs-dir", str(project.runs))
    t0 = time.monotonic()
    while not running_container(project.lock, "nb"):
        assert night.poll() is None, night.communicate()
        assert time.monotonic() - t0 < 60, "the second control never started"
        time.sleep(0.1)
    night.kill()
    night.communicate()
    [night_dir] = sorted((project.runs / "nights").iterdir())
    before, lock_files = tree(project.runs), locks(project)

    code, doc = dry(project, "night", str(camp), "--runs-dir", str(project.runs))
    assert code == 0, doc
    assert doc["night"] == {"continues": str(night_dir), "slots": [1, 2], "left_running": 1}
    assert [c["control"] for c in doc["controls"]] == ["nb", "nc"]
    assert doc["seal"]["digest"] == fresh["seal"]["digest"]
    text = project.harness("night", str(camp), "--runs-dir", str(project.runs), "--dry-run")
    assert f"would continue night {night_dir}: 2 slots of 3 left to run" in text.stdout
    assert tree(project.runs) == before, "the journal and run folders are untouched"
    assert locks(project) == lock_files
    assert GpuSlot(project.lock).night_lock.exists()  # the killed night's, still free

    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
        launched = [(r.control, r.attempt) for r in j.rows() if r.state == "accepted"]
    assert launched == [("na", 1), ("nb", 2), ("nc", 1)]  # nb again and nc: as said


def test_rerun_dry_run_creates_nothing(project, cleanup_containers):
    project.control("re", QUICK)
    camp = project.campaign("recamp", ["re"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [orig] = runs(project)
    [night_dir] = sorted((project.runs / "nights").iterdir())
    before, lock_files = tree(project.runs), locks(project)

    code, doc = dry(project, "rerun", str(orig), "--reason", "check")
    assert code == 0 and doc["command"] == "rerun" and doc["exit_code"] == 0
    [one] = doc["reruns"]
    assert one["rerun_of"] == str(orig) and one["seal"]["digest"] == runjson.read(orig).seal
    assert "plain repeat: seal unchanged" in one["notes"]
    text = project.harness("rerun", str(orig), "--reason", "check", "--dry-run")
    assert text.returncode == 0 and f"rerun of: {orig} (accepted)" in text.stdout
    nothing = project.harness("rerun", "--failed", str(night_dir), "--reason", "check",
                              "--dry-run")
    assert nothing.returncode == 0 and "nothing to rerun" in nothing.stdout
    assert tree(project.runs) == before and locks(project) == lock_files
    assert not (project.runs / "reruns.jsonl").exists()

    real = project.harness("rerun", str(orig), "--reason", "check")
    assert real.returncode == 0, real.stderr
    [new] = [p for p in runs(project) if p != orig]
    assert runjson.read(new).seal == one["seal"]["digest"]

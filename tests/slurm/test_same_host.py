"""`same_host:` groups on the private cluster: a group of paired controls is ONE Slurm job
that runs each member's own `harness run`, in the group's order, on the node Slurm gave it.

Two simulated hosts, one GPU lock per host (HOME=<home_root>/<node>). The group is listed
in the opposite order of the campaign's `controls:`, so the order seen is the group's.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

from harness.base.catalogue import SLURM_NO_SEAL
from harness.measure.slurm.query import JobState

from .conftest import Cluster
from .test_night_window import (
    REFUSER,
    SLEEPER,
    held,
    host_labels,
    run_night,
    window_campaign,
)
from .test_slurm_jobs import HARNESS
from .test_slurm_night import job_events, journal_rows, scancel, when_running

GROUP = "same_host:\n  - [ref, ctl]\n"  # ref first: the group's order, not the campaign's


def group_campaign(project, name: str) -> Path:
    controls = {"ctl": SLEEPER.format(s=4), "ref": SLEEPER.format(s=4),
                "solo": SLEEPER.format(s=4)}
    return window_campaign(project, name, controls, 4, GROUP)


def check_group_ran_together(night_dir: Path) -> dict[str, dict]:
    """Every row accepted; ref and ctl in one job (journal and run.json), on one node, ref's
    lock released before ctl's was taken; solo in a job of its own. The run.json records."""
    rows = journal_rows(night_dir)
    assert [(c, s) for _, c, _, s, _ in rows] == [("ctl", "accepted"), ("ref", "accepted"),
                                                 ("solo", "accepted")], rows
    jobs = job_events(night_dir)
    by_control = {c: (row_id, Path(run_dir)) for row_id, c, _, _, run_dir in rows}
    records = {c: json.loads((d / "run.json").read_text()) for c, (_, d) in by_control.items()}
    [group_job] = jobs[by_control["ctl"][0]]
    assert jobs[by_control["ref"][0]] == [group_job]
    assert jobs[by_control["solo"][0]] != [group_job]
    ctl, ref = records["ctl"]["slurm"], records["ref"]["slurm"]
    assert ctl["job_id"] == ref["job_id"] == group_job
    assert ctl["node"] == ref["node"] and ctl["token"] == ref["token"]
    assert ctl["token"].endswith("+ref:ctl"), ctl["token"]
    first, second = held(records["ref"]), held(records["ctl"])
    assert first[1] <= second[0], f"ref {first} and ctl {second} overlap or ran out of order"
    assert by_control["ctl"][1].name != by_control["ref"][1].name  # each its own run
    for _, run_dir in by_control.values():
        assert (run_dir / "SHA256SUMS").is_file()
    print(f"\ngroup job {group_job} on {ctl['node']}: ref held the lock {first}, "
          f"ctl {second}; solo in job {jobs[by_control['solo'][0]]}")
    return records


def test_a_group_runs_in_one_job_on_one_node_in_its_order(cluster: Cluster, project,
                                                          cleanup_containers) -> None:
    cleanup_containers.extend(host_labels(project))
    campaign = group_campaign(project, "group")
    r, wall = run_night(cluster, project, campaign)
    print(f"\nsame_host night: wall time {wall:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    check_group_ran_together(night_dir)
    submitted = [json.loads(line) for line in r.stderr.splitlines()
                 if '"slurm-submitted"' in line]
    assert [s["controls"] for s in submitted] == [["ref", "ctl"], ["solo"]], submitted


def test_kill_9_while_a_group_runs_adopts_its_one_job(cluster: Cluster, project,
                                                      cleanup_containers) -> None:
    """`kill -9` of the controller once the group's job is submitted: the restart finds the
    job (journaled id, or its token) for both rows and submits nothing again for them."""
    cleanup_containers.extend(host_labels(project))
    campaign = group_campaign(project, "groupkill")
    argv = [HARNESS, "night", str(campaign), "--runs-dir", str(project.runs), "--drop",
            str(project.root / "drop"), "--json-lines"]
    env = {**cluster.env, "HOME": str(project.root / "controller")}
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=project.root)
    submitted = None
    for line in first.stderr:
        if '"slurm-submitted"' in line:
            submitted = json.loads(line)
            break
    first.kill()  # SIGKILL right after the group's job was sent
    first.wait(timeout=30)
    first.stderr.close()
    assert submitted is not None and submitted["controls"] == ["ref", "ctl"], submitted
    time.sleep(1.0)
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=project.root,
                       timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    adopted = [json.loads(line) for line in r.stderr.splitlines() if '"slurm-adopted"' in line]
    assert [(a["job_id"], a["controls"]) for a in adopted] == \
        [(submitted["job_id"], ["ref", "ctl"])], r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    check_group_ran_together(night_dir)
    night_jobs = [j for j in {**cluster.history(), **cluster.jobs()}.values()
                  if night_dir.name in (j.name or "")]
    assert sorted(j.name.rsplit("+", 1)[1] for j in night_jobs) == ["ref:ctl", "solo"], \
        f"a job was sent twice: {night_jobs}"


def test_scancel_of_a_group_retries_its_unfinished_members_together(
        cluster: Cluster, project, cleanup_containers) -> None:
    """An admin's scancel while the group's first member runs: that member seals
    `interrupted` (its own evidence), the second never starts and is `interrupted` after
    the seal grace (SLURM-NO-SEAL); the retry runs both again in ONE new job, in order."""
    labels = host_labels(project)
    cleanup_containers.extend(labels)
    controls = {"ctl": SLEEPER.format(s=8), "ref": SLEEPER.format(s=8)}
    # "  seal_grace" continues window_campaign's executor block, which the text ends with
    campaign = window_campaign(project, "groupcancel", controls, 4,
                               "  seal_grace: 5\nretry:\n  interrupted: 1\n" + GROUP)
    seen: list = []
    killer = threading.Thread(target=when_running,
                              args=(cluster, labels, scancel(cluster), seen))
    killer.start()
    r, _ = run_night(cluster, project, campaign)
    killer.join()
    assert seen, "no job was seen running"
    cancelled = [j.job_id for j in seen]
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(c, a, s) for _, c, a, s, _ in rows] == [
        ("ctl", 1, "interrupted"), ("ctl", 2, "accepted"),
        ("ref", 1, "interrupted"), ("ref", 2, "accepted")], r.stdout + r.stderr
    jobs = job_events(night_dir)
    first = {row[1]: row for row in rows if row[2] == 1}
    again = {row[1]: row for row in rows if row[2] == 2}
    assert jobs[first["ref"][0]] == jobs[first["ctl"][0]] == cancelled
    [retry_job] = jobs[again["ref"][0]]
    assert jobs[again["ctl"][0]] == [retry_job] != cancelled[0]
    ref1 = json.loads((Path(first["ref"][4]) / "run.json").read_text())
    assert ref1["status"] == "interrupted" and ref1["slurm"]["job_id"] == cancelled[0]
    assert not Path(first["ctl"][4]).exists() or \
        json.loads((Path(first["ctl"][4]) / "run.json").read_text())["status"] == "interrupted"
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        [(reason,)] = c.execute("SELECT reason FROM runs WHERE id = ?",
                                (first["ctl"][0],)).fetchall()
    assert reason.startswith(SLURM_NO_SEAL), reason  # it never started: no seal came
    records = {c: json.loads((Path(row[4]) / "run.json").read_text())
               for c, row in again.items()}
    assert records["ref"]["slurm"]["token"].endswith("+2+ref:ctl")
    assert records["ref"]["slurm"]["node"] == records["ctl"]["slurm"]["node"]
    assert held(records["ref"])[1] <= held(records["ctl"])[0]
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_stop_withdraws_every_member_of_a_pending_group_job(cluster: Cluster, project,
                                                              cleanup_containers) -> None:
    """stop-on-refusal while the group's job still waits for a GPU: the job is cancelled,
    Slurm never gave it a node, both rows are planned again (`withdraw`, not run) and
    neither member made a run folder. 4 GPUs and 7 jobs before the group's, six of them
    15-s sleepers: before the group could get a GPU, four of them must have ended, long
    after the refusal is recorded (each host's lock serialises its pair)."""
    cleanup_containers.extend(host_labels(project))
    controls = {"refuser": REFUSER}
    controls.update({f"s{i}": SLEEPER.format(s=15) for i in range(1, 7)})
    controls.update({"ctl": SLEEPER.format(s=2), "ref": SLEEPER.format(s=2)})
    campaign = window_campaign(project, "groupstop", controls, 8,
                               "stop_policy: stop-on-refusal\n" + GROUP)
    r, _ = run_night(cluster, project, campaign)
    assert r.returncode == 1, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    rows = {c: (row_id, s, d) for row_id, c, _, s, d in journal_rows(night_dir)}
    assert rows["refuser"][1] == "refused"
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        withdrawn = dict(c.execute("SELECT run, detail FROM events WHERE event = 'withdraw'"))
    for member in ("ref", "ctl"):
        row_id, state, run_dir = rows[member]
        assert (state, run_dir) == ("planned", None), (member, rows)
        assert "not run" in withdrawn[row_id]
    jobs = job_events(night_dir)
    [group_job] = jobs[rows["ref"][0]]
    assert jobs[rows["ctl"][0]] == [group_job]
    job = {**cluster.history(), **cluster.jobs()}[group_job]
    assert job.state == JobState.CANCELLED and job.node is None, job
    assert not [p for p in project.runs.iterdir() if p.name.startswith(("ref-", "ctl-"))]

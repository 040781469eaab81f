"""`same_host:` groups on the private cluster: a group of paired controls is ONE Slurm job
that runs each member's own `harness run`, in the group's order, on the node Slurm gave it.

Two simulated hosts, one GPU lock per host (HOME=<home_root>/<node>). The group is listed
in the opposite order of the campaign's `controls:`, so the order seen is the group's.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from .conftest import Cluster
from .test_night_window import SLEEPER, held, host_labels, run_night, window_campaign
from .test_slurm_jobs import HARNESS
from .test_slurm_night import job_events, journal_rows

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

"""Evidence comes home as bundles, on the private two-host cluster.

One job per simulated host (the other excluded), each with its own runs folder standing for
the host's local disk: each job runs the real `harness run`, and its script exports the
sealed run into `<drop>/bundles/<run-id>.tar.gz`. The controller's side then works from the
drop alone: `bundle merge` of every bundle there gives one night bundle that verifies, and
`bundle collect` brings both runs home, each verifying as `harness verify` judges it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.base.names import RunId
from harness.base.timeutil import stamp
from harness.measure.slurm import job
from harness.measure.slurm import script as jobscript
from harness.measure.slurm.job import ControlTime, JobSpec, Site
from harness.measure.slurm.query import JobState

from .conftest import Cluster

HARNESS = str(Path(sys.executable).parent / "harness")
NODES = ("node1", "node2")


def test_each_hosts_run_reaches_the_drop_and_merges_into_one_bundle(
        cluster: Cluster, tmp_path, project, cleanup_containers) -> None:
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("quick", 'command: [python3, -c, "print(\'ok\')"]\ntimeout: 60\n')
    campaign = project.campaign("slurmdrop", ["quick"])
    drop = tmp_path / "drop"
    (drop / "jobs").mkdir(parents=True)
    night = f"slurmdrop-{stamp()}"
    submitted = {}
    for slot, node in enumerate(NODES):
        site = Site(harness=HARNESS, workdir=str(project.root), drop=str(drop),
                    runs_dir=str(tmp_path / node / "runs"))  # the host's own disk
        spec = JobSpec(night=night, campaign_file=str(campaign), slot=slot, attempt=1,
                       controls=(ControlTime("quick", 60, 5),), lock_wait_s=120,
                       run_id=RunId.mint("quick"),
                       exclude=tuple(n for n in NODES if n != node))
        Path(job.script_path(site, job.token_of(spec))).write_text(jobscript.job_script(spec, site))
        submitted[cluster.sbatch(job.sbatch_argv(spec, site))] = (node, spec.run_id)
    jobs = cluster.wait_ended(list(submitted), timeout=300)
    logs = {i: "".join(p.read_text() for p in (drop / "jobs").glob(f"*.{i}.log"))
            for i in submitted}
    for job_id, (node, run_id) in submitted.items():
        assert jobs[job_id].state == JobState.DONE, logs[job_id]
        assert jobs[job_id].node == node
        record = json.loads((tmp_path / node / "runs" / run_id / "run.json").read_text())
        assert record["status"] == "accepted", logs[job_id]

    bundles = sorted((drop / "bundles").iterdir())
    assert [p.name for p in bundles] == sorted(f"{r}.tar.gz" for _, r in submitted.values())
    merged = tmp_path / "night.tar.gz"
    r = project.harness("bundle", "merge", *map(str, bundles), "-o", str(merged))
    assert r.returncode == 0, r.stdout + r.stderr
    v = project.harness("bundle", "verify", str(merged), "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    assert sorted(json.loads(v.stdout)["runs"]) == sorted(f"data/{r}"
                                                          for _, r in submitted.values())
    info = subprocess.run(["tar", "-xOzf", str(merged), "--wildcards", "*/bag-info.txt"],
                          capture_output=True, text=True, check=True).stdout
    assert info.count("Run-Id: ") == 2

    home = tmp_path / "controller" / "runs"
    c = project.harness("bundle", "collect", str(drop), "--runs-dir", str(home))
    assert c.returncode == 0 and "collected 2 new bundle(s)" in c.stdout, c.stdout + c.stderr
    for _, run_id in submitted.values():
        ok = project.harness("verify", str(home / run_id))
        assert ok.returncode == 0, ok.stdout + ok.stderr
    again = project.harness("bundle", "collect", str(drop), "--runs-dir", str(home))
    assert again.returncode == 0 and "collected 0 new bundle(s)" in again.stdout


def test_a_night_with_runs_on_the_hosts_disks_takes_each_run_home_from_the_drop(
        cluster: Cluster, tmp_path, project, cleanup_containers) -> None:
    """`executor.host_runs_dir`: the hosts write their runs where the controller never
    looks; each job exports its sealed run into the drop, and the night verifies and
    unpacks it into its own RUNS_DIR as the job ends, recording each bundle's digest."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    for name in ("q1", "q2"):
        project.control(name, 'command: [python3, -c, "print(\'ok\')"]\ntimeout: 60\n')
    host_disk = tmp_path / "hostdisk"
    campaign = project.campaign("slurmhome", ["q1", "q2"], f"""\
        executor:
          kind: slurm
          host_runs_dir: {host_disk}
          window: 2
        """)
    drop = tmp_path / "drop"
    r = subprocess.run([HARNESS, "night", str(campaign), "--runs-dir", str(project.runs),
                        "--drop", str(drop), "--new", "--json-lines"], capture_output=True,
                       text=True, env=cluster.env, cwd=project.root, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    events = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    came = {e["runs"][0]: e["sha256"] for e in events if e["event"] == "bundle-collected"}
    [night_dir] = (project.runs / "nights").iterdir()
    rows = sqlite_rows(night_dir)
    assert [(c, s) for c, s, _ in rows] == [("q1", "accepted"), ("q2", "accepted")]
    for _, _, run_dir in rows:
        run_id = Path(run_dir).name
        assert Path(run_dir).parent == project.runs and (host_disk / run_id).is_dir()
        assert came[run_id] == subprocess.run(
            ["sha256sum", str(drop / "bundles" / f"{run_id}.tar.gz")], capture_output=True,
            text=True, check=True).stdout.split()[0]
        ok = project.harness("verify", run_dir)
        assert ok.returncode == 0, ok.stdout + ok.stderr
    records = [json.loads(line) for line in (project.runs / "collected.jsonl").open()]
    assert sorted((x["ok"], x["sha256"]) for x in records) == sorted(
        (True, digest) for digest in came.values())


def sqlite_rows(night_dir: Path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        return c.execute("SELECT control, state, run_dir FROM runs ORDER BY plan_index").fetchall()

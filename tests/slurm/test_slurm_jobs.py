"""Jobs built by harness.measure.slurm.job run on a real (private) Slurm cluster.

The cluster has two simulated hosts with two fake GPUs each (conftest.py). The harness
job exec's the real `harness run` on the rehearsal campaign, with one HOME (and so one
GPU lock) per simulated host, and its run is sealed and verified like any other.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from harness.base.timeutil import stamp
from harness.measure.perflog import PERFLOG_DIR
from harness.measure.slurm import follow, job, query
from harness.measure.slurm import script as jobscript
from harness.measure.slurm.job import SCRIPT_PATH_ENV, ControlTime, JobSpec, Site, submit_env
from harness.measure.slurm.query import JobState
from tests.conftest import containers_with_label

from .conftest import REPO, Cluster

HARNESS = str(Path(sys.executable).parent / "harness")


def site_for(tmp: Path) -> Site:
    site = Site(harness=HARNESS, workdir=str(REPO), runs_dir=str(tmp / "runs"),
                drop=str(tmp / "drop"), gfx="gfx1100", home_root=str(tmp / "homes"))
    (tmp / "drop" / "jobs").mkdir(parents=True)
    return site


def run_folders(runs: Path) -> list[Path]:
    """The run folders under `runs` (not perflog/, which every sealed run appends to)."""
    return sorted(p for p in runs.iterdir() if p.is_dir() and p.name != PERFLOG_DIR)


def submit(cluster: Cluster, spec: JobSpec, site: Site) -> str:
    """What the executor's shell will do: write the script, then sbatch its argv."""
    path = Path(job.script_path(site, job.token_of(spec)))
    path.write_text(jobscript.job_script(spec, site))
    return cluster.sbatch(job.sbatch_argv(spec, site))


def sleeper(project, cleanup_containers: list, name: str, seconds: int, timeout: int) -> str:
    """A control `name` that sleeps `seconds` (stop grace 3 s); returns the label of the
    project's GPU lock, whose containers the test's cleanup removes."""
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    project.control(name, f"""\
        command: [python3, -c, "import time; time.sleep({seconds})"]
        timeout: {timeout}
        stop_grace: 3
        """)
    return label


def sleeper_job(cluster: Cluster, tmp_path: Path, project, cleanup_containers: list,
                camp: str, seconds: int, timeout: int, more: tuple[str, ...] = ()
                ) -> tuple[str, Path, str, str]:
    """`sleeper` as the one control of a job built for campaign `camp` (its other controls
    `more`), submitted and running: (lock label, campaign file, job id, node)."""
    label = sleeper(project, cleanup_containers, "sleeper", seconds, timeout)
    campaign = project.campaign(camp, ["sleeper", *more])
    site = replace(site_for(tmp_path), workdir=str(project.root), runs_dir=str(project.runs),
                   home_root=None)
    spec = JobSpec(night=f"{camp}-{stamp()}", campaign_file=str(campaign),
                   controls=(ControlTime("sleeper", timeout, 3),), slot=0, attempt=1,
                   lock_wait_s=60)
    job_id = submit(cluster, spec, site)
    return label, campaign, job_id, cluster.wait_running(job_id).node


def wait_for_container(label: str, what: str = "the container never started") -> None:
    deadline = time.monotonic() + 120
    while not containers_with_label(label, all_states=False):
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_gres_gives_each_job_its_own_gpu_on_both_hosts(cluster: Cluster, tmp_path) -> None:
    """Four jobs at once on two hosts of two GPUs: every (host, GPU index) once, through
    ROCR_VISIBLE_DEVICES (gres.conf Flags=amd_gpu_env). Submitted as the builder submits
    (`--export=ALL` of `job.submit_env`), the controller's own ROCR_VISIBLE_DEVICES and
    settings never reach the job, and neither does a login environment of the node (which
    `--export=NIL` made slurmd build: LOGNAME, SHELL, the profile's PATH)."""
    leaky = {**cluster.env, "ROCR_VISIBLE_DEVICES": "7", "HARNESS_LEAK": "yes"}
    ids = []
    for _ in range(4):
        r = subprocess.run(["sbatch", "--parsable", "--gres=gpu:1", "--export=ALL",
                            f"--output={tmp_path}/%j.out", "--wrap",
                            "sleep 2; echo $SLURMD_NODENAME ${ROCR_VISIBLE_DEVICES:-none}"
                            " ${HARNESS_LEAK:-clean} ${LOGNAME:-nologin} ${SHELL:-noshell}"
                            " $PATH"],
                           capture_output=True, text=True, env=submit_env(leaky), timeout=30)
        assert r.returncode == 0, r.stderr
        ids.append(r.stdout.strip().split(";")[0])
    jobs = cluster.wait_ended(ids, timeout=60)
    assert all(jobs[i].state == JobState.DONE for i in ids)
    assert all(cluster.history()[i].exit_code == 0 for i in ids)  # squeue has no exit code
    seen = sorted(":".join((tmp_path / f"{i}.out").read_text().split()) for i in ids)
    clean = f"clean:nologin:noshell:{SCRIPT_PATH_ENV}"
    assert seen == [f"node1:0:{clean}", f"node1:1:{clean}", f"node2:0:{clean}",
                    f"node2:1:{clean}"]


def test_a_built_job_runs_harness_run_and_seals_it(cluster: Cluster, tmp_path) -> None:
    site = site_for(tmp_path)
    spec = JobSpec(night=f"rehearsal-{stamp()}", campaign_file="campaigns/rehearsal.yaml",
                   controls=(ControlTime("rehearsal-compute", 600, 10, 30),), slot=0,
                   attempt=1, lock_wait_s=120)
    token = job.token_of(spec)
    job_id = submit(cluster, spec, site)

    # A controller killed right after sbatch finds the job by its token: adopted, not resent.
    found = query.by_name(query.parse_squeue(
        cluster.cli(*query.squeue_argv([token])).stdout, strict=True).jobs)
    assert [j.job_id for j in found[token]] == [job_id]

    ended = cluster.wait_ended([job_id], timeout=300)[job_id]
    log = Path(job.log_path(site, token).replace("%j", job_id)).read_text()
    assert ended.state == JobState.DONE and cluster.history()[job_id].exit_code == 0, log
    assert ended.name == token and ended.node in ("node1", "node2")
    runs = run_folders(tmp_path / "runs")
    assert len(runs) == 1, log
    record = json.loads((runs[0] / "run.json").read_text())
    assert record["status"] == "accepted", log
    assert record["control"]["name"] == "rehearsal-compute"
    verify = subprocess.run([HARNESS, "verify", str(runs[0])], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # the GPU lock was the simulated host's own, under its own HOME
    assert (tmp_path / "homes" / ended.node / "gpu.lock").exists()
    # jobcomp (no accounting database here) records the same end
    history = cluster.history()
    assert history[job_id].state == JobState.DONE and history[job_id].name == token


def test_scancel_reaches_harness_run_which_stops_and_seals(cluster: Cluster, tmp_path,
                                                           project, cleanup_containers) -> None:
    """`exec` makes the batch shell the harness: scancel's SIGTERM stops the container and
    the run is sealed `interrupted`; no container is left behind."""
    label, _, job_id, _ = sleeper_job(cluster, tmp_path, project, cleanup_containers,
                                      "slurmcamp", 300, 600)
    wait_for_container(label)
    assert cluster.cli("scancel", job_id).returncode == 0
    ended = cluster.wait_ended([job_id], timeout=120)[job_id]
    assert ended.state == JobState.CANCELLED
    deadline = time.monotonic() + 60
    while not any((d / "SHA256SUMS").exists() for d in project.run_dirs()):
        assert time.monotonic() < deadline, "the run was never sealed"
        time.sleep(0.3)
    [run] = project.run_dirs()
    assert project.record(run)["status"] == "interrupted"
    assert containers_with_label(label) == [], "the harness removed its container"


def test_two_jobs_on_one_host_wait_for_its_gpu_lock(cluster: Cluster, tmp_path) -> None:
    """Slurm gives each job its own GPU, yet the host's flock still orders the runs: both
    jobs land on node1 (--exclude=node2), share its HOME, and the second one waits."""
    site = site_for(tmp_path)
    night = f"rehearsal-{stamp()}"
    specs = [JobSpec(night=night, campaign_file="campaigns/rehearsal.yaml",
                     controls=(ControlTime("rehearsal-compute", 600, 10, 30),), slot=slot,
                     attempt=1, lock_wait_s=300, exclude=("node2",)) for slot in (0, 1)]
    ids = [submit(cluster, spec, site) for spec in specs]
    jobs = cluster.wait_ended(ids, timeout=300)
    assert [jobs[i].node for i in ids] == ["node1", "node1"]
    records = [json.loads((d / "run.json").read_text())
               for d in run_folders(tmp_path / "runs")]
    assert [r["status"] for r in records] == ["accepted", "accepted"]
    spans = sorted((r["lock"]["acquired"], r["lock"]["released"]) for r in records)
    assert spans[0][1] <= spans[1][0], f"hold intervals overlap: {spans}"
    assert max(r["lock"]["wait_s"] for r in records) > 1.0, "one job waited for the lock"
    assert {r["lock"]["path"] for r in records} == {str(tmp_path / "homes/node1/gpu.lock")}


def test_node_down_mid_run_ends_the_job_before_the_host_seals(cluster: Cluster, tmp_path,
                                                             project, cleanup_containers):
    """Slurm's NODE_FAIL is no run status: the row awaits the seal, and the host (still
    running the harness) seals the run on its own; the retry would avoid that node."""
    label, _, job_id, node = sleeper_job(cluster, tmp_path, project, cleanup_containers,
                                         "slurmdown", 8, 120)
    wait_for_container(label)
    try:
        r = cluster.cli("scontrol", "update", f"nodename={node}", "state=down",
                        "reason=harness-test")
        assert r.returncode == 0, r.stderr
        ended = cluster.wait_ended([job_id], timeout=60)[job_id]
        assert ended.state == JobState.NODE_FAIL  # --no-requeue: it stays ended
        assert not any((d / "SHA256SUMS").exists() for d in project.run_dirs()), \
            "Slurm gave up before the host sealed"
        deadline = time.monotonic() + 90
        while not any((d / "SHA256SUMS").exists() for d in project.run_dirs()):
            assert time.monotonic() < deadline, "the host never sealed the run"
            time.sleep(0.3)
        [run] = project.run_dirs()
        assert project.record(run)["status"] in ("accepted", "interrupted")  # the host's word
        assert follow.retry_exclude((), ended.node, ended.state) == (node,)
    finally:
        cluster.cli("scontrol", "update", f"nodename={node}", "state=resume")
        cluster.wait_nodes_up()


EPILOG = REPO / "scripts" / "slurm-epilog.sh"


def test_scancel_kill_leaves_a_container_that_the_epilog_removes(cluster: Cluster, tmp_path,
                                                                 project, cleanup_containers):
    """SIGKILL gives the harness no chance to stop its container (dockerd's child, not the
    job's); the Epilog, run as slurmd runs it (root, SLURM_JOB_ID), stops and removes only
    that job's containers, and the next run on the host seals the cut-off folder."""
    project.control("quick", "command: [python3, -c, pass]\ntimeout: 60\n")
    _, campaign, job_id, _ = sleeper_job(cluster, tmp_path, project, cleanup_containers,
                                         "slurmkill", 300, 600, more=("quick",))
    mine = f"org.harness.slurm-job={job_id}"
    wait_for_container(mine, "the labelled container never started")
    assert cluster.cli("scancel", "--batch", "-s", "KILL", job_id).returncode == 0
    cluster.wait_ended([job_id], timeout=60)
    time.sleep(1.0)
    assert containers_with_label(mine, all_states=False), "SIGKILL left no container?"
    other = subprocess.run(["bash", str(EPILOG)], env={"SLURM_JOB_ID": str(int(job_id) + 99),
                                                      "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 0 and containers_with_label(mine, all_states=False)
    r = subprocess.run(["sh", str(EPILOG)], env={"SLURM_JOB_ID": job_id, "PATH": "/usr/bin"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert containers_with_label(mine) == [], "the Epilog left the job's container"
    [run] = [d for d in project.run_dirs() if d.name.startswith("sleeper-")]
    assert not (run / "SHA256SUMS").exists()  # cut off: the next run on the host seals it
    again = subprocess.run([HARNESS, "run", str(campaign), "--control", "quick",
                            "--runs-dir", str(project.runs)], capture_output=True, text=True,
                           cwd=project.root, timeout=120)
    assert (run / "SHA256SUMS").exists(), again.stdout + again.stderr
    assert project.record(run)["status"] == "interrupted"

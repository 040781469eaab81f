"""`kill -9 slurmctld` mid-job, then a restart: the night's journal stays consistent.

While the controller is down every squeue fails, so the night hears nothing about its job:
that is not news that the job ended. The job keeps running on its node (slurmd does not
need slurmctld for that), the restarted slurmctld recovers it from its saved state, and
the row is recorded from the run's own seal, once, with the one job it was given.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import containers_with_label

from .conftest import Cluster
from .test_slurm_jobs import HARNESS
from .test_slurm_night import job_events, journal_rows

# Down long enough for the executor's lost_after_s (30 s) and the seal grace below (5 s) to
# pass between its polls, which back off while they fail (each failed squeue also waits
# ~9 s for the controller); the control outlives the outage.
DOWN_S = 75
RUN_S = 120


def _ctld_pid(cluster: Cluster) -> int:
    return int((cluster.dir / "run" / "slurmctld.pid").read_text().strip())


def _restart_ctld(cluster: Cluster) -> None:
    r = cluster.cli("slurmctld", "-f", str(cluster.conf))
    assert r.returncode == 0, r.stderr
    cluster.wait_nodes_up()


def _wait_container(label: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not containers_with_label(label, all_states=False):
        assert time.monotonic() < deadline, "the job's container never started"
        time.sleep(0.3)


def test_slurmctld_killed_mid_job_and_restarted_keeps_the_journal_consistent(
        cluster: Cluster, project, cleanup_containers) -> None:
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    project.control("long", f"""\
        command: [python3, -c, "import time; time.sleep({RUN_S})"]
        timeout: 300
        stop_grace: 3
        """)
    campaign = project.campaign("ctldkill", ["long"], """\
        executor:
          kind: slurm
          seal_grace: 5s
        """)
    env = {**cluster.env, "PATH": os.environ["PATH"] + ":/usr/sbin:/sbin"}
    night = subprocess.Popen(
        [HARNESS, "night", str(campaign), "--runs-dir", str(project.runs), "--drop",
         str(project.root / "drop"), "--new", "--json-lines"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project.root)
    killed = False
    try:
        _wait_container(label)
        time.sleep(10)  # slurmctld has saved the job as running (it saves within seconds)
        os.kill(_ctld_pid(cluster), signal.SIGKILL)
        killed = True
        time.sleep(DOWN_S)
        assert night.poll() is None, "the night ended while slurmctld was down"
        assert containers_with_label(label, all_states=False), "the job died with slurmctld"
    finally:
        if killed:
            _restart_ctld(cluster)
    out, err = night.communicate(timeout=400)
    assert night.returncode == 0, out + err
    events = [json.loads(line)["event"] for line in err.splitlines() if line.startswith("{")]
    assert "slurm-lost" not in events and "slurm-end" in events, events
    [night_dir] = (project.runs / "nights").iterdir()
    [(row_id, control, attempt, state, run_dir)] = journal_rows(night_dir)
    assert (control, attempt, state) == ("long", 1, "accepted")
    [job_id] = job_events(night_dir)[row_id]
    record = json.loads((Path(run_dir) / "run.json").read_text())
    assert record["status"] == "accepted" and record["slurm"]["job_id"] == job_id
    verify = subprocess.run([HARNESS, "verify", run_dir], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    ran = [j for j in {**cluster.history(), **cluster.jobs()}.values()
           if night_dir.name in (j.name or "")]
    assert [j.job_id for j in ran] == [job_id], ran

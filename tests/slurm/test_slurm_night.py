"""`harness night --executor slurm` on the private cluster: the whole loop, for real.

The night submits one job per control (`harness run --run-id`, the folder the journal
committed), follows it with batched polls, and records each row from the sealed run, never
from Slurm's word; the night's evidence exports and verifies as one bundle.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

from harness.base.catalogue import ENV_SLURM_NO_EVIDENCE, ENV_SLURM_SUBMIT, SLURM_NO_SEAL
from harness.measure.slurm.query import JobState
from tests.conftest import containers_with_label

from .conftest import REPO, Cluster
from .test_slurm_jobs import HARNESS, sleeper


def night(cluster: Cluster, campaign: Path, runs: Path, drop: Path, *extra: str,
          cwd: Path = REPO, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([HARNESS, "night", str(campaign), "--executor", "slurm",
                           "--runs-dir", str(runs), "--drop", str(drop), "--new",
                           "--json-lines", *extra], capture_output=True, text=True,
                          env=cluster.env, cwd=cwd, timeout=timeout)


def journal_rows(night_dir: Path) -> list[tuple]:
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        return c.execute("SELECT id, control, attempt, state, run_dir FROM runs "
                         "ORDER BY plan_index, attempt").fetchall()


def job_events(night_dir: Path) -> dict[int, list[str]]:
    """row id -> the Slurm job ids the journal recorded for it (`slurm-job` events)."""
    out: dict[int, list[str]] = {}
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        for run, detail in c.execute("SELECT run, detail FROM events "
                                     "WHERE event = 'slurm-job' ORDER BY id"):
            out.setdefault(run, []).append(detail.split(" ", 1)[0])
    return out


def test_rehearsal_night_via_slurm_all_accepted_and_its_bundle_verifies(cluster: Cluster,
                                                                      tmp_path) -> None:
    runs, drop = tmp_path / "runs", tmp_path / "drop"
    r = night(cluster, REPO / "campaigns" / "rehearsal-night.yaml", runs, drop)
    assert r.returncode == 0, r.stdout + r.stderr
    [night_dir] = (runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(c, s) for _, c, _, s, _ in rows] == [
        ("night-a", "accepted"), ("night-b", "accepted"), ("night-c", "accepted")]
    jobs = job_events(night_dir)
    assert sorted(jobs) == [row[0] for row in rows] and all(len(j) == 1 for j in jobs.values())
    for row_id, _, _, _, run_dir in rows:
        record = json.loads((Path(run_dir) / "run.json").read_text())
        assert record["slurm"]["job_id"] == jobs[row_id][0]
        assert record["slurm"]["node"] in ("node1", "node2")
        assert record["slurm"]["gpus"] in ("0", "1")
        argv = json.loads((Path(run_dir) / "docker-vector.json").read_text())["argv"]
        assert f"org.harness.slurm-job={jobs[row_id][0]}" in argv
        assert not any("ROCR_VISIBLE_DEVICES" in a for a in argv)
    history = cluster.history()  # Slurm itself ran them under the journaled ids
    assert all(history[j[0]].state == JobState.DONE for j in jobs.values())
    bundle = tmp_path / "night.tar"
    for argv in (["bundle", "export", str(night_dir), "-o", str(bundle)],
                 ["bundle", "verify", str(bundle)]):
        done = subprocess.run([HARNESS, *argv], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_scancel_mid_run_is_sealed_interrupted_and_retried(cluster: Cluster, project,
                                                          cleanup_containers) -> None:
    """An admin's scancel: the host's harness stops the container and seals the run
    `interrupted` (evidence, not Slurm's CANCELLED); the retry policy runs it again."""
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    project.control("nap", """\
        command: [python3, -c, "import time; time.sleep(12)"]
        timeout: 120
        stop_grace: 3
        """)
    campaign = project.campaign("slurmnap", ["nap"], "retry:\n  interrupted: 1\n")
    seen: list = []
    killer = threading.Thread(target=when_running,
                              args=(cluster, label, scancel(cluster), seen))
    killer.start()
    r = night(cluster, campaign, project.runs, project.root / "drop", cwd=project.root)
    killer.join()
    assert seen, "no job was seen running"
    cancelled = [j.job_id for j in seen]
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(a, s) for _, _, a, s, _ in rows] == [(1, "interrupted"), (2, "accepted")], \
        r.stdout + r.stderr
    first = json.loads((Path(rows[0][4]) / "run.json").read_text())
    assert first["status"] == "interrupted" and first["slurm"]["job_id"] == cancelled[0]
    assert job_events(night_dir)[rows[0][0]] == cancelled
    assert containers_with_label(label) == [], "no container left behind"
    assert r.returncode == 0, r.stdout + r.stderr


def test_controller_killed_mid_night_resumes_without_duplicate_jobs(cluster: Cluster, project,
                                                                    cleanup_containers):
    """`kill -9` of `harness night` while its job runs: the restarted night adopts that job
    (found by the journaled id), submits nothing twice, and every row ends terminal."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    for name in ("nap1", "nap2"):
        project.control(name, """\
            command: [python3, -c, "import time; time.sleep(6)"]
            timeout: 120
            stop_grace: 3
            """)
    campaign = project.campaign("slurmkill9", ["nap1", "nap2"])
    drop = project.root / "drop"
    argv = [HARNESS, "night", str(campaign), "--executor", "slurm", "--runs-dir",
            str(project.runs), "--drop", str(drop), "--json-lines"]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=cluster.env, cwd=project.root)
    submitted = None
    for line in first.stderr:
        if '"slurm-submitted"' in line:
            submitted = json.loads(line)
            break
    first.kill()  # SIGKILL: no chance to record anything more
    first.wait(timeout=30)
    first.stderr.close()
    assert submitted is not None and submitted["control"] == "nap1"
    r = subprocess.run(argv, capture_output=True, text=True, env=cluster.env,
                       cwd=project.root, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"slurm-adopted"' in r.stderr and submitted["job_id"] in r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(c, a, s) for _, c, a, s, _ in rows] == [("nap1", 1, "accepted"),
                                                     ("nap2", 1, "accepted")]
    night_jobs = [j for j in cluster.jobs().values() if night_dir.name in (j.name or "")]
    names = [j.name for j in night_jobs]
    # one job carries both (executor.runs_per_job): adopted, never sent again
    assert submitted["controls"] == ["nap1", "nap2"]
    assert names == [submitted["token"]], f"a slot ran twice: {night_jobs}"
    assert all(job_events(night_dir)[row[0]] == [submitted["job_id"]] for row in rows)


def when_running(cluster: Cluster, labels: str | list[str], act, out: list) -> None:
    """Once a job runs and a container with one of `labels` is up, `act(job)`; the job goes
    into `out`."""
    labels = [labels] if isinstance(labels, str) else labels
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if any(containers_with_label(label, all_states=False) for label in labels):
            running = [j for j in cluster.jobs().values() if j.state == JobState.RUNNING]
            if running:
                out.append(running[0])
                act(running[0])
                return
        time.sleep(0.3)


def scancel(cluster: Cluster):
    """The act of an admin's scancel of a job."""
    return lambda j: cluster.cli("scancel", j.job_id)


def _night_acting(cluster: Cluster, campaign: Path, project, label: str,
                  act) -> tuple[subprocess.CompletedProcess, list]:
    """The night, with `act(job)` done to the first job once its container runs; whatever
    happens, the nodes are resumed after. Returns (the night's process, the jobs acted on)."""
    seen: list = []
    killer = threading.Thread(target=when_running, args=(cluster, label, act, seen))
    killer.start()
    try:
        r = night(cluster, campaign, project.runs, project.root / "drop", cwd=project.root)
        killer.join()
    finally:
        for j in seen:
            cluster.cli("scontrol", "update", f"nodename={j.node}", "state=resume")
        cluster.wait_nodes_up()
    assert seen, "no job was seen running"
    return r, seen

def test_node_down_mid_run_the_row_takes_the_hosts_seal(cluster: Cluster, project,
                                                        cleanup_containers) -> None:
    """Slurm says NODE_FAIL at once, but the host goes on and seals the run: the row is
    what the host's seal says, not what Slurm said (nor SLURM-NO-SEAL, the controller's
    word when no seal comes)."""
    label = sleeper(project, cleanup_containers, "short", 8, 120)
    campaign = project.campaign("slurmnodedown", ["short"])

    def down(j) -> None:
        cluster.cli("scontrol", "update", f"nodename={j.node}", "state=down",
                    "reason=harness-test")

    r, seen = _night_acting(cluster, campaign, project, label, down)
    assert '"state": "node-fail"' in r.stderr, r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    [(row_id, _, _, row_state, run_dir)] = journal_rows(night_dir)
    record = json.loads((Path(run_dir) / "run.json").read_text())
    assert row_state == record["status"] and "recovered" not in record
    assert record["slurm"]["job_id"] == seen[0].job_id
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        [(reason,)] = c.execute("SELECT reason FROM runs WHERE id = ?", (row_id,)).fetchall()
    assert SLURM_NO_SEAL not in (reason or "")
    assert r.returncode == (0 if row_state == "accepted" else 1), r.stdout + r.stderr


def test_node_lost_without_a_seal_is_interrupted_and_retried_elsewhere(
        cluster: Cluster, project, cleanup_containers) -> None:
    """The node is lost and its harness killed (no seal comes; its Epilog stops the
    container): after the grace the row is interrupted (SLURM-NO-SEAL), the cut-off folder
    is sealed as found, and the retry avoids the lost node."""
    label = sleeper(project, cleanup_containers, "short", 8, 120)
    campaign = project.campaign("slurmlost", ["short"], "retry:\n  interrupted: 1\n"
                                "executor:\n  kind: slurm\n  seal_grace: 5s\n")

    def lose(j) -> None:
        """Slurm loses the node (NODE_FAIL at once), and the host's harness dies before it
        can seal: SIGKILL within the container's 3-s stop grace."""
        [cid] = containers_with_label(label, all_states=False)
        pid = subprocess.run(["docker", "inspect", "-f",
                              '{{index .Config.Labels "org.harness.launcher-pid"}}', cid],
                             capture_output=True, text=True).stdout.strip()
        cluster.cli("scontrol", "update", f"nodename={j.node}", "state=down",
                    "reason=harness-test")
        os.kill(int(pid), signal.SIGKILL)
        # What the lost node's Epilog does once it ends the job (here all simulated hosts
        # share one dockerd, so the retry's orphan check would see the container).
        subprocess.run(["sh", str(REPO / "scripts" / "slurm-epilog.sh")], timeout=60,
                       env={"SLURM_JOB_ID": j.job_id, "HARNESS_EPILOG_GRACE": "1",
                            "PATH": "/usr/bin:/bin"})

    r, seen = _night_acting(cluster, campaign, project, label, lose)
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(a, s) for _, _, a, s, _ in rows] == [(1, "interrupted"), (2, "accepted")], \
        r.stdout + r.stderr
    first = Path(rows[0][4])
    assert (first / "SHA256SUMS").exists()  # sealed as found, by the controller
    assert '"state": "node-fail"' in r.stderr, r.stderr
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        [(reason,)] = c.execute("SELECT reason FROM runs WHERE id = ?", (rows[0][0],)).fetchall()
    assert reason.startswith(SLURM_NO_SEAL), reason
    second = json.loads((Path(rows[1][4]) / "run.json").read_text())
    assert second["slurm"]["node"] != seen[0].node, "the retry went back to the lost node"
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_refused_submission_is_an_environment_fault(cluster: Cluster, tmp_path) -> None:
    """sbatch refuses a partition the cluster does not have: exit 3, nothing queued, the row
    failed with ENV-SLURM-SUBMIT (the night stops: the next control would meet the same)."""
    runs = tmp_path / "runs"
    r = night(cluster, REPO / "campaigns" / "rehearsal-night.yaml", runs, tmp_path / "drop",
              "--partition", "nosuchpartition")
    assert r.returncode == 3, r.stdout + r.stderr
    [night_dir] = (runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [s for _, _, _, s, _ in rows] == ["failed", "planned", "planned"]
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        [(reason,)] = c.execute("SELECT reason FROM runs WHERE state = 'failed'").fetchall()
    assert reason.startswith(ENV_SLURM_SUBMIT) and "nosuchpartition" in reason
    assert not [j for j in cluster.jobs().values() if night_dir.name in (j.name or "")]


def test_a_job_that_never_starts_harness_run_is_an_environment_fault(cluster: Cluster,
                                                                   project) -> None:
    """The job ran and ended on its own, but no run folder ever appeared (here: the hosts'
    `harness` is /bin/false): after the grace, failed with ENV-SLURM-NO-EVIDENCE, exit 3."""
    project.control("quick", "command: [python3, -c, pass]\ntimeout: 60\n")
    campaign = project.campaign("slurmnoevidence", ["quick"], "executor:\n  kind: slurm\n"
                                "  harness: /bin/false\n  seal_grace: 2s\n")
    r = night(cluster, campaign, project.runs, project.root / "drop", cwd=project.root)
    assert r.returncode == 3, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        [(state, reason)] = c.execute("SELECT state, reason FROM runs").fetchall()
    assert state == "failed" and reason.startswith(ENV_SLURM_NO_EVIDENCE), reason
    assert "/jobs/harness+" in reason  # where the job's log is

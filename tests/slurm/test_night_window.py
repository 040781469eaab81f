"""The submit window on the private cluster: several jobs of one night at once, for real.

Two simulated hosts with two fake GPUs each and one GPU lock per host (each job's HOME is
`<home_root>/<node>`, the lock `~/gpu.lock`): a window of 4 runs four controls at once,
Slurm places two on each host, and each host's own flock serialises its pair (one run of
the pair waits for the lock). A stop-on-refusal cancels only the jobs still pending and
records them as not run; the running ones finish and seal.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
import textwrap
import time
from datetime import datetime
from pathlib import Path

from harness.measure.slurm.query import JobState

from .conftest import Cluster
from .test_slurm_jobs import HARNESS
from .test_slurm_night import job_events, journal_rows

SLEEPER = """\
command: [python3, -c, "import time; time.sleep({s})"]
timeout: 120
stop_grace: 3
"""
REFUSER = """\
command: [python3, -c, "print('ok')"]
timeout: 60
post_steps:
  - exit-code
  - {name: never, run: ["false"]}
"""


def window_campaign(project, name: str, controls: dict[str, str], window: int,
                    extra: str = "", runs_per_job: int = 1) -> Path:
    """Controls and a campaign whose GPU lock is each host's own (~/gpu.lock per HOME);
    one job per control unless `runs_per_job` says more."""
    for control, body in controls.items():
        project.control(control, body)
    path = project.root / "campaigns" / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: {name}
        row: TEST
        lock: ~/gpu.lock
        lock_timeout: 300
        controls: {json.dumps(list(controls))}
        executor:
          kind: slurm
          window: {window}
          runs_per_job: {runs_per_job}
          home_root: {project.root / "homes"}
        """) + extra)
    return path


def host_labels(project) -> list[str]:
    return [f"org.harness.lock={project.root / 'homes' / node / 'gpu.lock'}"
            for node in ("node1", "node2")]


def run_night(cluster: Cluster, project, campaign: Path, *extra: str,
              ) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run([HARNESS, "night", str(campaign), "--runs-dir", str(project.runs),
                        "--drop", str(project.root / "drop"), "--new", "--json-lines",
                        *extra], capture_output=True, text=True, cwd=project.root,
                       env={**cluster.env, "HOME": str(project.root / "controller")},
                       timeout=500)
    return r, time.monotonic() - t0


def held(record: dict) -> tuple[float, float]:
    """When the run held its host's GPU lock (the container ran inside), epoch seconds."""
    lock = record["lock"]
    return (datetime.fromisoformat(lock["acquired"]).timestamp(),
            datetime.fromisoformat(lock["released"]).timestamp())


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def events(night_dir: Path, event: str) -> list[tuple[int, str, str]]:
    with sqlite3.connect(night_dir / "journal.sqlite") as c:
        return c.execute("SELECT run, detail, at FROM events WHERE event = ? ORDER BY id",
                         (event,)).fetchall()


def test_a_window_of_four_runs_four_jobs_at_once_and_each_host_serialises_its_pair(
        cluster: Cluster, project, cleanup_containers) -> None:
    cleanup_containers.extend(host_labels(project))
    names = [f"w{i}" for i in range(1, 5)]
    campaign = window_campaign(project, "window4", {n: SLEEPER.format(s=5) for n in names}, 4)
    r, wall = run_night(cluster, project, campaign)
    print(f"\nwindow 4: night wall time {wall:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(c, s) for _, c, _, s, _ in rows] == [(n, "accepted") for n in names]
    jobs = job_events(night_dir)
    assert sorted(jobs) == [row[0] for row in rows] and all(len(j) == 1 for j in jobs.values())
    # All four were submitted before the first outcome was recorded: four in flight.
    submitted = [at for _, _, at in events(night_dir, "slurm-job")]
    first_outcome = min(at for _, _, at in events(night_dir, "accept"))
    assert len(submitted) == 4 and max(submitted) < first_outcome
    records = {row[0]: json.loads((Path(row[4]) / "run.json").read_text()) for row in rows}
    for row_id, record in records.items():
        assert record["slurm"]["job_id"] == jobs[row_id][0]
    intervals = {i: held(rec) for i, rec in records.items()}
    assert any(overlap(intervals[a], intervals[b])
               for a, b in itertools.combinations(intervals, 2)), intervals
    by_node: dict[str, list[dict]] = {}
    for record in records.values():
        by_node.setdefault(record["slurm"]["node"], []).append(record)
    assert sorted(by_node) == ["node1", "node2"], by_node.keys()
    print("lock waits:", {n: [rec["lock"]["wait_s"] for rec in p] for n, p in by_node.items()})
    for node, pair in by_node.items():
        assert len(pair) == 2, f"{node} ran {len(pair)} jobs"
        a, b = (held(rec) for rec in pair)
        assert not overlap(a, b), f"{node}'s lock let two runs in at once"
        assert max(rec["lock"]["wait_s"] for rec in pair) > 1.0, \
            f"{node}: no lock wait in {[rec['lock'] for rec in pair]}"


def test_a_window_of_one_runs_one_job_at_a_time(cluster: Cluster, project,
                                               cleanup_containers) -> None:
    """The same night with --jobs 1: nothing overlaps (and the wall time is the baseline
    docs/slurm.md compares the window with)."""
    cleanup_containers.extend(host_labels(project))
    names = [f"w{i}" for i in range(1, 5)]
    campaign = window_campaign(project, "window1", {n: SLEEPER.format(s=5) for n in names}, 4)
    r, wall = run_night(cluster, project, campaign, "--jobs", "1")
    print(f"\nwindow 1: night wall time {wall:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [s for *_, s, _ in rows] == ["accepted"] * 4
    intervals = [held(json.loads((Path(row[4]) / "run.json").read_text())) for row in rows]
    assert not any(overlap(a, b) for a, b in itertools.combinations(intervals, 2))


def test_stop_on_refusal_cancels_only_pending_jobs_and_records_them_not_run(
        cluster: Cluster, project, cleanup_containers) -> None:
    """A refusing first control under stop-on-refusal, a window of 8 on 4 GPUs: the jobs
    still pending are cancelled (rows planned again, a `withdraw` event, no run folder,
    Slurm never gave them a node); a job that started but still waited on its host's lock
    launches nothing (the controller made its claim first) and is not run either; the
    running ones finish and seal."""
    cleanup_containers.extend(host_labels(project))
    controls = {"refuser": REFUSER}
    controls.update({f"s{i}": SLEEPER.format(s=8) for i in range(1, 8)})
    campaign = window_campaign(project, "windowstop", controls, 8,
                               "stop_policy: stop-on-refusal\n")
    r, _ = run_night(cluster, project, campaign)
    assert r.returncode == 1, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    assert json.loads((night_dir / "ended.json").read_text())["why"] == "stop-policy"
    rows = journal_rows(night_dir)
    assert rows[0][1:4] == ("refuser", 1, "refused"), rows
    withdrawn = {run: detail for run, detail, _ in events(night_dir, "withdraw")}
    assert withdrawn, f"no pending job was cancelled: {rows}\n{r.stderr}"
    jobs = job_events(night_dir)
    assert len(jobs) == 8, "every control was submitted (window 8)"
    ended = {**cluster.history(), **cluster.jobs()}
    claims = project.root / "drop" / "claims"
    for row_id, _, _, state, run_dir in rows:
        if row_id in withdrawn:
            assert state == "planned" and run_dir is None
            assert "not run" in withdrawn[row_id]
            job = ended[jobs[row_id][0]]
            if job.node is not None:  # Slurm started it (it waited on its host's lock):
                # the controller's claim came first, so it launched nothing
                folder = next(project.runs.glob(f"{jobs_control(job)}-*"), None)
                assert folder is None or not (folder / "docker-vector.json").exists(), job
                assert folder is None or (claims / folder.name).is_dir()
            else:
                assert job.state == JobState.CANCELLED, job
        else:
            assert state in ("accepted", "refused"), (row_id, state)
            assert (Path(run_dir) / "SHA256SUMS").is_file()
    launched = [p.name for p in project.runs.iterdir()
                if p.name.split("-", 1)[0] in controls and (p / "docker-vector.json").exists()]
    assert len(launched) == 8 - len(withdrawn), launched


def jobs_control(job) -> str:
    """The one control a one-control job's token names."""
    return (job.name or "").rsplit("+", 1)[-1]


def test_kill_9_with_jobs_in_flight_resumes_without_duplicates(cluster: Cluster, project,
                                                               cleanup_containers) -> None:
    """`kill -9` of the controller while the window is filling: the restart adopts every
    job already submitted (by the journaled id, or by its token), records a row whose job
    was never sent as not run and sends it then, and no slot runs twice."""
    cleanup_containers.extend(host_labels(project))
    names = [f"k{i}" for i in range(1, 5)]
    campaign = window_campaign(project, "windowkill", {n: SLEEPER.format(s=5) for n in names},
                               4)
    argv = [HARNESS, "night", str(campaign), "--runs-dir", str(project.runs), "--drop",
            str(project.root / "drop"), "--json-lines"]
    env = {**cluster.env, "HOME": str(project.root / "controller")}
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=project.root)
    submitted = []
    for line in first.stderr:
        if '"slurm-submitted"' in line:
            submitted.append(json.loads(line))
            if len(submitted) == 2:
                break
    first.kill()  # SIGKILL: the window was still filling
    first.wait(timeout=30)
    first.stderr.close()
    assert len(submitted) == 2
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=project.root,
                       timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    for s in submitted:
        assert f'"slurm-adopted", "control": "{s["control"]}", "job_id": "{s["job_id"]}"' \
            in r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(c, a, s) for _, c, a, s, _ in rows] == [(n, 1, "accepted") for n in names]
    night_jobs = [j for j in {**cluster.history(), **cluster.jobs()}.values()
                  if night_dir.name in (j.name or "")]
    names_seen = [j.name for j in night_jobs]
    assert len(names_seen) == 4 and len(set(names_seen)) == 4, f"a slot ran twice: {night_jobs}"

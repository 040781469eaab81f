"""A slot's next controls in one job, each next run started early and waiting on the host's
GPU lock, on the private cluster, for real.

The rows keep their statuses from their own sealed runs; a refusal under stop-on-refusal
stops the night and the prestarted runs launch nothing (their claims are the controller's,
or the verdict of the run before refused them), and their rows are not run.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from pathlib import Path

from harness.base.catalogue import SLURM_NIGHT_STOPPED, SLURM_NOT_CLAIMED

from .conftest import Cluster
from .test_night_window import (
    REFUSER,
    SLEEPER,
    events,
    held,
    host_labels,
    overlap,
    run_night,
    window_campaign,
)
from .test_slurm_night import job_events, journal_rows


def _at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_a_jobs_runs_prestart_on_the_lock_and_each_row_is_its_sealed_runs(
        cluster: Cluster, project, cleanup_containers) -> None:
    """One job carries the four controls; each next `harness run` asked for the GPU lock
    while the run before held it (its start was off the gap), no two held it at once, and
    each row's status is its own sealed run's."""
    cleanup_containers.extend(host_labels(project))
    names = [f"p{i}" for i in range(1, 5)]
    campaign = window_campaign(project, "prestart", {n: SLEEPER.format(s=3) for n in names},
                               1, runs_per_job=4)
    r, _ = run_night(cluster, project, campaign)
    assert r.returncode == 0, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    rows = journal_rows(night_dir)
    assert [(c, s) for _, c, _, s, _ in rows] == [(n, "accepted") for n in names]
    jobs = job_events(night_dir)
    assert len({j[0] for j in jobs.values()}) == 1, f"not one job: {jobs}"
    records = [json.loads((Path(row[4]) / "run.json").read_text()) for row in rows]
    for row, record in zip(rows, records, strict=True):
        assert record["status"] == row[3]
        assert record["slurm"]["job_id"] == jobs[row[0]][0]
    assert len({rec["slurm"]["node"] for rec in records}) == 1
    intervals = [held(rec) for rec in records]
    for before, after in itertools.pairwise(records):
        # asked while the run before still held the lock: it was started early
        assert _at(after["lock"]["requested"]) < _at(before["lock"]["released"]), \
            (before["lock"], after["lock"])
    assert not any(overlap(a, b) for i, a in enumerate(intervals) for b in intervals[i + 1:])


def test_a_refusal_stops_the_night_and_the_prestarted_runs_launch_nothing(
        cluster: Cluster, project, cleanup_containers) -> None:
    """stop-on-refusal, the refusing control first in a job of four: the night stops after
    it, and the runs after it in the job (one already waiting on the lock) launch no
    container: each row is planned again (not run), and a folder the host sealed for it
    says only that it never launched (the verdict of the run before, or a claim the
    controller made first)."""
    cleanup_containers.extend(host_labels(project))
    controls = {"refuser": REFUSER, **{f"s{i}": SLEEPER.format(s=3) for i in range(1, 4)}}
    campaign = window_campaign(project, "prestartstop", controls, 1,
                               "stop_policy: stop-on-refusal\n", runs_per_job=4)
    r, _ = run_night(cluster, project, campaign)
    assert r.returncode == 1, r.stdout + r.stderr
    [night_dir] = (project.runs / "nights").iterdir()
    assert json.loads((night_dir / "ended.json").read_text())["why"] == "stop-policy"
    rows = journal_rows(night_dir)
    assert rows[0][1:4] == ("refuser", 1, "refused"), rows
    assert [(c, s, d) for _, c, _, s, d in rows[1:]] == [
        (f"s{i}", "planned", None) for i in range(1, 4)], r.stderr
    withdrawn = {run: detail for run, detail, _ in events(night_dir, "withdraw")}
    assert sorted(withdrawn) == sorted(row[0] for row in rows[1:])
    assert all("never launched" in d for d in withdrawn.values()), withdrawn
    [job_id] = {j[0] for j in job_events(night_dir).values()}
    cluster.wait_ended([job_id])  # the host's side is over too: nothing more may start
    claims = project.root / "drop" / "claims"
    later = [p for p in project.runs.iterdir() if p.name.split("-", 1)[0] in ("s1", "s2", "s3")]
    assert later, "the job started no run after the refusal: nothing was prestarted"
    for folder in later:
        assert not (folder / "docker-vector.json").exists(), f"{folder.name} launched"
        record = json.loads((folder / "run.json").read_text())
        assert record["status"] == "refused"
        [rule] = {x["rule"] for x in record["reasons"]}
        # refused by the verdict of the run before (it claimed nothing), or its claim was
        # the controller's
        assert rule == SLURM_NIGHT_STOPPED or (rule == SLURM_NOT_CLAIMED
                                               and (claims / folder.name).is_dir()), record
    assert not any(f"s{i}" in line and '"container"' in line for i in range(1, 4)
                   for line in r.stderr.splitlines())

"""harness.measure.slurm.calls against the real cluster: submit, poll by token, cancel, refusals.

These jobs exec a stand-in for `harness` (a small script in tmp), so the shell's own
behaviour is tested in seconds; test_slurm_jobs.py runs the real harness."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.base.timeutil import stamp
from harness.measure.slurm import calls, job
from harness.measure.slurm import script as jobscript
from harness.measure.slurm.job import ControlTime, JobSpec, Site
from harness.measure.slurm.query import JobState

from .conftest import Cluster


def stand_in(tmp: Path, body: str) -> Site:
    exe = tmp / "fake-harness"
    exe.write_text(f"#!/bin/sh\necho \"$@\"\n{body}\n")
    exe.chmod(0o755)
    return Site(harness=str(exe), workdir=str(tmp), runs_dir="runs", drop=str(tmp / "drop"))


def spec(slot: int = 0) -> JobSpec:
    return JobSpec(night=f"calls-{stamp()}", campaign_file="c.yaml",
                   controls=(ControlTime("ctl", 60, 5),), slot=slot, attempt=1,
                   lock_wait_s=10)


def wait_for(cluster: Cluster, token: str, job_id: str, done, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        answer = calls.poll([token], [job_id], jobcomp=cluster.dir / "jobcomp.txt",
                            env=cluster.env)
        found = answer.jobs.get(job_id)
        if found is not None and done(found):
            return answer, found
        assert time.monotonic() < deadline, (f"{job_id}: {found}; errors {answer.errors}, "
                                             f"skipped {answer.skipped}, live {answer.live}")
        time.sleep(0.3)


def test_submit_poll_by_token_and_history(cluster: Cluster, tmp_path) -> None:
    site, one = stand_in(tmp_path, "exit 0"), spec()
    token = job.token_of(one)
    result = calls.submit(one, site, env=cluster.env)
    assert result.kind == "submitted" and result.job_id, result
    answer, found = wait_for(cluster, token, result.job_id,
                             lambda j: j.state == JobState.DONE and j.exit_code is not None)
    assert found.name == token and found.exit_code == 0
    assert answer.history_complete and answer.errors == [] and answer.skipped == 0
    log = Path(job.log_path(site, token).replace("%j", result.job_id)).read_text()
    assert log.split() == ["run", "c.yaml", "--control", "ctl", "--runs-dir", "runs",
                           "--lock-timeout", "10s", "--json-lines"]
    script = Path(job.script_path(site, token))
    assert script.read_text() == jobscript.job_script(one, site)


def test_without_accounting_sacct_is_an_error_not_a_state(cluster: Cluster, tmp_path) -> None:
    answer = calls.poll(["harness+x+0+1+y"], ["1"], use_sacct=True, env=cluster.env)
    assert answer.errors and answer.errors[0].startswith("sacct:")
    assert not answer.history_complete
    assert answer.live and answer.jobs.get("999999") is None  # squeue answered: absent


def test_cancel_a_pending_job_withdraws_its_row(cluster: Cluster, tmp_path) -> None:
    site = stand_in(tmp_path, "sleep 60")
    jobs = []
    # fill all four GPUs, so the last job stays pending
    for slot in range(5):
        result = calls.submit(spec(slot), site, env=cluster.env)
        assert result.kind == "submitted", result
        jobs.append(result.job_id)
    try:
        pending = jobs[-1]
        token = job.token_of(spec(4))
        _, found = wait_for(cluster, token, pending, lambda j: j.state == JobState.PENDING)
        assert found.node is None and found.reason
        assert calls.cancel([pending], env=cluster.env) is None
        _, found = wait_for(cluster, token, pending, lambda j: j.state == JobState.CANCELLED)
    finally:
        assert calls.cancel(jobs, env=cluster.env) is None


def test_cancel_pending_spares_the_running_jobs_of_the_list(cluster: Cluster,
                                                           tmp_path) -> None:
    """A stop hands over every job it has not seen running, and its view is a poll old:
    cancel_pending must cancel only the jobs Slurm still holds pending, leave the running
    ones running, and leave none of them held (a plain scancel killed them all)."""
    site = stand_in(tmp_path, "sleep 60")
    specs = [spec(slot) for slot in range(5)]
    jobs = [calls.submit(s, site, env=cluster.env).job_id for s in specs]
    try:
        for job_id in jobs[:4]:
            cluster.wait_running(job_id)
        pending, token = jobs[-1], job.token_of(specs[-1])
        wait_for(cluster, token, pending, lambda j: j.state == JobState.PENDING)
        assert calls.cancel_pending(jobs, env=cluster.env) is None
        _, found = wait_for(cluster, token, pending, lambda j: j.state == JobState.CANCELLED)
        assert found.node is None
        live = cluster.jobs()
        assert all(live[j].state == JobState.RUNNING for j in jobs[:4]), live
        held = cluster.cli("squeue", "-h", "-o", "%i %r", "-j", ",".join(jobs[:4]))
        assert "JobHeld" not in held.stdout, held.stdout
    finally:
        assert calls.cancel(jobs, env=cluster.env) is None


def test_refused_and_unreachable_submissions(cluster: Cluster, tmp_path) -> None:
    site = stand_in(tmp_path, "exit 0")
    refused = calls.submit(spec(), Site(**{**site.__dict__, "partition": "nope"}),
                           env=cluster.env)
    assert refused.kind == calls.SubmitAnswer.REJECTED and "Invalid partition" in refused.message
    everyone = calls.submit(spec(), site, env=cluster.env, timeout_s=5,
                            sbatch="/nonexistent/sbatch")
    assert everyone.kind == "transient" and "command not found" in everyone.message
    conf = tmp_path / "other.conf"  # a controller that is not there
    text = cluster.conf.read_text().replace("SlurmctldPort=", "SlurmctldPort=1")
    conf.write_text(text)
    gone = calls.submit(spec(), site, env={**os.environ, "SLURM_CONF": str(conf)},
                        timeout_s=20)
    assert gone.kind == "transient", gone


def test_deadline_from_until_is_taken_or_refused_by_slurm(cluster: Cluster, tmp_path) -> None:
    site = stand_in(tmp_path, "exit 0")
    now = datetime.now(UTC)
    late = calls.submit(replace(spec(), until=now - timedelta(minutes=5)), site,
                        env=cluster.env)
    assert late.kind == calls.SubmitAnswer.REJECTED, late  # the --until has passed: nothing queued
    ok = calls.submit(replace(spec(1), until=now + timedelta(hours=3)), site, env=cluster.env)
    assert ok.kind == "submitted", ok
    shown = cluster.cli("scontrol", "show", "job", ok.job_id).stdout
    assert "Deadline=" + job.slurm_deadline(now + timedelta(hours=3)) in shown

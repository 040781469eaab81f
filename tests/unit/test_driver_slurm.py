"""The Slurm executor's decisions, without Slurm: what a control's job asks for, what one
batched answer means for the job being followed, and what a missing seal becomes.

The real loop (sbatch, squeue, the sealed run) is tested on a real cluster in tests/slurm;
here each decision is fed answers as Slurm's parsers give them (harness.measure.slurm.query.Job).
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.base.catalogue import ENV_SLURM_NO_EVIDENCE, SLURM_NO_SEAL
from harness.config.loader import require_campaign
from harness.driver.plan import LaunchRequest
from harness.driver.slurmjobs import Settings, SlurmExecutor, Watch, of_night
from harness.measure.slurm import job
from harness.measure.slurm.calls import Poll
from harness.measure.slurm.query import Job, JobState
from harness.measure.ui import Reporter
from harness.pipeline.recover import seal_interrupted

REPO = Path(__file__).resolve().parents[2]
NIGHT = "rehearsal-night-20261130T192354Z"


def executor(tmp_path: Path, **settings) -> tuple[SlurmExecutor, io.StringIO]:
    loaded = require_campaign(REPO / "campaigns" / "rehearsal-night.yaml")
    site = job.Site(harness="/opt/h/bin/harness", workdir=str(REPO),
                    runs_dir=str(tmp_path / "runs"), drop=str(tmp_path / "drop"))
    out = io.StringIO()
    return SlurmExecutor(loaded, Reporter(out), Settings(
        night=NIGHT, campaign_file=str(loaded.campaign_file), site=site, **settings)), out


def request(tmp_path: Path, attempt: int = 1) -> LaunchRequest:
    return LaunchRequest("night-b", tmp_path / "runs" / "night-b-20261130T192403Z-36eaa3a9",
                         attempt=attempt, plan_index=1)


def answer(state: JobState | None, node: str | None = "node2", errors=()) -> Poll:
    jobs = {} if state is None else {"7": Job("7", "t", state, node=node)}
    live = not any(e.startswith("squeue") for e in errors)
    return Poll(jobs=jobs, errors=list(errors), live=live)


def test_the_job_names_the_journaled_run_and_the_controls_own_times(tmp_path) -> None:
    ex, _ = executor(tmp_path, lock_wait_s=300)
    spec = ex.spec(request(tmp_path, attempt=2))
    assert spec.run_id == "night-b-20261130T192403Z-36eaa3a9"
    assert (spec.slot, spec.attempt, spec.night) == (1, 2, NIGHT)
    control, _ = ex.loaded.controls["night-b"]
    [ct] = spec.controls
    assert (ct.name, ct.timeout_s, ct.stop_grace_s) == ("night-b", control.timeout,
                                                       control.stop_grace)
    argv = job.run_argv(spec, ex.settings.site)
    assert argv[argv.index("--run-id") + 1] == spec.run_id
    assert job.token_of(spec) == f"harness+{NIGHT}+1+2+night-b"


def test_an_ended_job_starts_the_grace_and_a_requeue_cancels_it(tmp_path) -> None:
    ex, out = executor(tmp_path)
    w = Watch("7", request(tmp_path), "t")
    assert ex.observe(w, answer(JobState.PENDING), 0.0) is True
    assert ex.observe(w, answer(JobState.PENDING), 1.0) is False  # nothing changed
    assert ex.observe(w, answer(JobState.RUNNING), 2.0) is True and w.ended_at is None
    assert ex.observe(w, answer(JobState.NODE_FAIL), 3.0) is True
    assert (w.ended_at, w.ended.state, w.ended.node) == (3.0, JobState.NODE_FAIL, "node2")
    ex.observe(w, answer(JobState.NODE_FAIL), 9.0)
    assert w.ended_at == 3.0  # the grace counts from the first answer that said so
    assert ex.observe(w, answer(JobState.PENDING), 10.0) is True and w.ended_at is None
    events = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert events == ["slurm-end"]


def test_a_job_missing_from_every_answer_is_ended_only_after_lost_after(tmp_path) -> None:
    ex, out = executor(tmp_path, lost_after_s=30)
    w = Watch("7", request(tmp_path), "t")
    ex.observe(w, answer(JobState.RUNNING), 0.0)
    assert ex.observe(w, answer(None), 1.0) is False and w.ended_at is None
    assert ex.observe(w, answer(None), 30.0) is False and w.ended_at is None
    assert ex.observe(w, answer(None), 31.0) is True and w.ended_at == 31.0
    assert w.ended is None and '"slurm-lost"' in out.getvalue()


def test_an_unreachable_controller_never_makes_a_running_job_lost(tmp_path) -> None:
    """slurmctld down (killed, restarting, failing over): squeue answers nothing, so the
    job is not absent from an answer, it is unknown. Counting that as `lost` would end a
    running job after lost_after_s and, after the seal grace, have the controller seal the
    host's live run folder as interrupted and submit the slot again."""
    ex, out = executor(tmp_path, lost_after_s=30)
    w = Watch("7", request(tmp_path), "t")
    ex.observe(w, answer(JobState.RUNNING), 0.0)
    down = ["squeue: slurm_load_jobs error: Unable to contact slurm controller"]
    for now in (1.0, 31.0, 300.0, 3600.0):
        assert ex.observe(w, answer(None, errors=down), now) is False
        assert w.ended_at is None and w.unknown_since is None
    assert w.failures == 4
    ex.observe(w, answer(None), 3601.0)  # back, and the job is gone from squeue: count now
    assert w.ended_at is None and w.unknown_since == 3601.0
    assert ex.observe(w, answer(None), 3632.0) is True and w.ended_at == 3632.0
    assert out.getvalue().count('"slurm-lost"') == 1


def test_failed_queries_count_only_while_the_job_is_not_seen(tmp_path) -> None:
    ex, _ = executor(tmp_path)
    w = Watch("7", request(tmp_path), "t")
    ex.observe(w, answer(None, errors=["squeue: timed out"]), 0.0)
    ex.observe(w, answer(None, errors=["squeue: timed out"]), 1.0)
    assert w.failures == 2
    ex.observe(w, answer(JobState.RUNNING, errors=["sacct: disabled"]), 2.0)
    assert w.failures == 0


def test_no_seal_after_slurm_ended_it_is_interrupted_and_the_retry_avoids_a_lost_node(
        tmp_path) -> None:
    ex, _ = executor(tmp_path, seal_grace_s=5)
    req = request(tmp_path)
    w = Watch("7", req, "t", ended=Job("7", "t", JobState.NODE_FAIL, node="node2"),
              ended_at=0.0)
    outcome = ex.unsealed(req, w)
    assert (outcome.status, outcome.exit_code, outcome.remote) == ("interrupted", 1, True)
    assert outcome.reasons[0].rule == SLURM_NO_SEAL
    assert outcome.reasons[0].detail.startswith("job 7 (node-fail, on node2)")
    assert ex.spec(request(tmp_path, attempt=2)).exclude == ("node2",)
    cancelled = Watch("8", req, "t", ended=Job("8", "t", JobState.CANCELLED, node="node1"),
                      ended_at=0)
    ex.unsealed(req, cancelled)  # an admin's scancel says nothing against node1
    assert ex.spec(request(tmp_path, attempt=3)).exclude == ("node2",)


def test_a_job_done_without_any_run_folder_is_an_environment_fault(tmp_path) -> None:
    ex, _ = executor(tmp_path)
    token = job.token_of(ex.spec(request(tmp_path)))  # the job's log is named by its token
    w = Watch("9", request(tmp_path), token, ended=Job("9", token, JobState.DONE, node="node1"),
              ended_at=0.0)
    outcome = ex.unsealed(request(tmp_path), w)
    assert (outcome.status, outcome.exit_code) == ("failed", 3)
    assert outcome.reasons[0].rule == ENV_SLURM_NO_EVIDENCE and outcome.reasons[0].environment
    assert f"{tmp_path}/drop/jobs/harness+{NIGHT}+1+1+night-b.9.log" in outcome.reasons[0].detail


@pytest.mark.parametrize("state", [JobState.DONE, JobState.TIMEOUT])
def test_a_left_unsealed_folder_is_sealed_as_found(tmp_path, state: JobState) -> None:
    """A shared runs folder the host left unsealed: sealed `interrupted` by the controller
    (a DONE job that made its folder is interrupted too, never an environment fault)."""
    ex, _ = executor(tmp_path)
    req = request(tmp_path)
    req.run_dir.mkdir(parents=True)
    (req.run_dir / "harness.json").write_text("{}")
    outcome = ex.unsealed(req, Watch("7", req, "t", ended=Job("7", "t", state), ended_at=0.0))
    assert outcome.status == "interrupted"
    assert (req.run_dir / "SHA256SUMS").is_file()


def test_a_stop_cancels_only_jobs_never_seen_running_and_those_are_not_run(tmp_path,
                                                                         monkeypatch) -> None:
    """cancel_pending: one scancel for the jobs not seen running; a cancelled job that ended
    with no node and no run folder is done with no outcome (not run); one that had started
    after all waits for its seal like any other."""
    ex, out = executor(tmp_path, seal_grace_s=60)
    sent: list[list[str]] = []
    monkeypatch.setattr("harness.measure.slurm.calls.cancel_pending",
                        lambda ids, **_: sent.append(sorted(ids)))
    running = Watch("7", request(tmp_path), "t")
    ex.observe(running, answer(JobState.RUNNING), 0.0)
    pending = Watch("8", LaunchRequest("night-c", tmp_path / "runs" / "c", plan_index=2), "u")
    ex.observe(pending, Poll(jobs={"8": Job("8", "u", JobState.PENDING)}), 0.0)
    assert ex.cancel_pending([running, pending]) == [pending]
    assert ex.cancel_pending([running, pending]) == []  # once
    assert sent == [["8"]] and '"slurm-cancelled-pending"' in out.getvalue()
    ex.observe(pending, Poll(jobs={"8": Job("8", "u", JobState.CANCELLED)}), 1.0)
    assert ex.settle(pending, 1.0) == [(pending.requests[0], None)]
    late = Watch("9", request(tmp_path, attempt=2), "v", cancelled=True)
    ex.observe(late, Poll(jobs={"9": Job("9", "v", JobState.CANCELLED, node="node1")}), 1.0)
    assert ex.settle(late, 1.0) == []  # it ran: its seal decides
    expired = Watch("10", request(tmp_path, attempt=3), "x")  # Slurm's --deadline, not ours
    ex.observe(expired, Poll(jobs={"10": Job("10", "x", JobState.CANCELLED, "DEADLINE")}), 2.0)
    assert ex.settle(expired, 2.0) == [(expired.requests[0], None)]
    admin = Watch("11", request(tmp_path, attempt=4), "y")  # an admin's scancel: retried
    ex.observe(admin, Poll(jobs={"11": Job("11", "y", JobState.CANCELLED, "CANCELLED")}), 2.0)
    assert ex.settle(admin, 2.0) == []


def _member(tmp_path: Path, control: str, slot: int, attempt: int = 1) -> LaunchRequest:
    return LaunchRequest(control, tmp_path / "runs" / f"{control}-20261130T192403Z-0a1b2c3{slot}",
                         attempt=attempt, plan_index=slot)


def test_a_group_is_one_job_whose_members_keep_their_own_runs(tmp_path) -> None:
    ex, _ = executor(tmp_path)
    a, b = _member(tmp_path, "night-a", 0), _member(tmp_path, "night-c", 2, attempt=2)
    spec = ex.spec((a, b))
    assert spec.run_id is None and spec.runs == ((a.run_id, 1), (b.run_id, 2))
    assert [c.name for c in spec.controls] == ["night-a", "night-c"]
    assert job.token_of(spec) == f"harness+{NIGHT}+0+2+night-a:night-c"


def test_a_groups_members_are_settled_one_by_one_in_order(tmp_path) -> None:
    """The first member's seal counts once the job moved on to the next member; the next
    one, cut off by Slurm's TIMEOUT, is interrupted after the grace; each is given once."""
    ex, _ = executor(tmp_path, seal_grace_s=60)
    a, b = _member(tmp_path, "night-a", 0), _member(tmp_path, "night-c", 2)
    w = Watch("7", (a, b), "t")
    ex.observe(w, answer(JobState.RUNNING), 0.0)
    for r in (a, b):
        assert not r.run_dir.exists()
    a.run_dir.mkdir(parents=True)
    (a.run_dir / "harness.json").write_text("{}")
    seal_interrupted(a.run_dir, "a test's seal")
    assert ex.settle(w, 1.0) == []  # sealed, but the job has not moved on yet
    b.run_dir.mkdir()
    (b.run_dir / "harness.json").write_text("{}")
    [(first, outcome)] = ex.settle(w, 2.0)
    assert first == a and outcome.status == "interrupted" and outcome.run_dir == a.run_dir
    assert ex.settle(w, 3.0) == []  # given once; b is not sealed
    ex.observe(w, answer(JobState.TIMEOUT), 4.0)
    assert ex.settle(w, 30.0) == []  # within the grace
    [(second, outcome)] = ex.settle(w, 65.0)
    assert second == b and outcome.status == "interrupted"
    assert outcome.reasons[0].rule == SLURM_NO_SEAL
    assert (b.run_dir / "SHA256SUMS").is_file()  # sealed as found


def test_a_group_cancelled_while_pending_withdraws_every_member(tmp_path) -> None:
    ex, _ = executor(tmp_path)
    a, b = _member(tmp_path, "night-a", 0), _member(tmp_path, "night-c", 2)
    w = Watch("8", (a, b), "u", cancelled=True)
    ex.observe(w, Poll(jobs={"8": Job("8", "u", JobState.CANCELLED)}), 1.0)
    assert ex.settle(w, 1.0) == [(a, None), (b, None)]
    assert ex.settle(w, 2.0) == []


def test_a_run_comes_home_from_the_drop_only_once_its_job_ran(tmp_path) -> None:
    """With host_runs_dir the controller asks the drop for a run it does not hold, but
    never before Slurm ran the job: a bundle that is there earlier cannot be the run."""
    asked: list[str] = []

    def fetch(run_id: str) -> dict | None:
        asked.append(run_id)
        return {"sha256": "ab" * 32, "ok": True, "runs": [run_id]}

    ex, out = executor(tmp_path, fetch=fetch, seal_grace_s=60)
    req = request(tmp_path)
    w = Watch("7", req, "t")
    ex.observe(w, answer(JobState.PENDING), 0.0)
    assert ex.settle(w, 0.0) == [] and asked == []
    ex.observe(w, answer(JobState.RUNNING), 1.0)
    assert ex.settle(w, 1.0) == [] and asked == [req.run_dir.name]
    assert '"bundle-collected"' in out.getvalue()
    req.run_dir.mkdir(parents=True)  # there now (a shared folder, or unpacked): not asked
    ex.settle(w, 2.0)
    assert asked == [req.run_dir.name]


def test_a_restarted_controller_finds_a_job_squeue_forgot_in_the_jobcomp_file(tmp_path) -> None:
    """Down longer than MinJobAge, the controller no longer sees its job in squeue (here
    squeue is not even there); the jobcomp record (a real line's format, from
    tests/fixtures/slurm/jobcomp-22.05.txt) says the job ran and ended on node1, so the row
    is followed to its evidence, never taken as not run and submitted a second time."""
    captured = (REPO / "tests" / "fixtures" / "slurm" / "jobcomp-22.05.txt").read_text()
    line = captured.splitlines()[0]
    req = request(tmp_path)
    ex, out = executor(tmp_path, seal_grace_s=0, env={"PATH": str(tmp_path / "no-slurm")})
    token = job.token_of(ex.spec(req))
    jobcomp = tmp_path / "jobcomp.txt"
    jobcomp.write_text(line.replace("JobId=1 ", "JobId=41 ")
                       .replace("Name=harness+n+0+1+a:b ", f"Name={token} ") + "\n")
    ex = SlurmExecutor(ex.loaded, ex.ui, replace(ex.settings, jobcomp=jobcomp))
    [(got, outcome)] = ex.resume(req, None)
    assert got == req and outcome is not None
    # it ran and ended without leaving its run here: the host's fault, said as such
    assert outcome.status == "failed" and outcome.reasons[0].rule == ENV_SLURM_NO_EVIDENCE
    assert "job 41 (done, on node1)" in outcome.reasons[0].detail
    assert '"slurm-adopted"' in out.getvalue()


def test_a_bundle_the_drop_gave_is_not_asked_for_again(tmp_path) -> None:
    """A refused bundle leaves no run folder; asking again each poll would hash the whole
    bundle each time for the same answer until the grace ends."""
    asked: list[str] = []

    def fetch(run_id: str) -> dict | None:
        asked.append(run_id)
        return {"sha256": "cd" * 32, "ok": False, "runs": [], "problems": ["forged"]}

    ex, out = executor(tmp_path, fetch=fetch, seal_grace_s=60)
    req = request(tmp_path)
    w = Watch("7", req, "t")
    ex.observe(w, answer(JobState.RUNNING), 0.0)
    for now in (1.0, 2.0, 3.0):
        assert ex.settle(w, now) == []
    assert asked == [req.run_dir.name]
    assert out.getvalue().count('"bundle-collected"') == 1


def test_recovering_a_launch_no_job_ran_and_no_folder_holds_says_it_never_ran(tmp_path):
    """A dead controller may die between the journal's `running` and sbatch: with no job
    carrying the token and no run folder, the executor answers None (the night plans the
    row again), after giving an sbatch already on its way time to land."""
    ex, _ = executor(tmp_path, env={"PATH": str(tmp_path / "no-slurm")})
    waited: list[float] = []
    ex.sleep = waited.append
    req = request(tmp_path)
    assert ex.recover((req,), None) == [(req, None)]
    assert waited and ex.preflight("night-b", tmp_path) == []  # each host is its own doctor


def test_the_jobcomp_file_is_followed_from_poll_to_poll_for_the_nights_jobs(tmp_path) -> None:
    """The executor keeps one tail of the jobcomp file: a second poll reads only what was
    appended, and only this night's jobs are remembered."""
    jobcomp = tmp_path / "jobcomp.txt"
    token = f"harness+{NIGHT}+1+1+night-b"
    line = "JobId={} Name={} JobState=COMPLETED NodeList=node1 ExitCode=0:0\n"
    jobcomp.write_text(line.format(7, token) + line.format(8, "harness+other+1+1+night-b"))
    ex, _ = executor(tmp_path, jobcomp=jobcomp, env={"PATH": str(tmp_path / "no-slurm")})
    w = Watch("7", request(tmp_path), token)
    ex.poll([w])
    assert set(ex.jobcomp.jobs) == {"7"} and w.ended is not None and w.ended.node == "node1"
    assert ex.jobcomp.offset == jobcomp.stat().st_size
    later = Watch("10", request(tmp_path, attempt=2), token.replace("+1+1+", "+1+2+"))
    with open(jobcomp, "a") as f:
        f.write(line.format(10, later.token).replace("COMPLETED", "NODE_FAIL"))
    ex.poll([w, later])
    assert set(ex.jobcomp.jobs) == {"7", "10"} and later.ended.state == JobState.NODE_FAIL
    assert ex.jobcomp.offset == jobcomp.stat().st_size
    assert of_night(NIGHT, Job("9", token, JobState.DONE))
    assert not of_night(NIGHT, Job("9", "harness+other+1+1+night-b", JobState.DONE))
    assert not of_night(NIGHT, Job("9", "a job of someone else", JobState.DONE))

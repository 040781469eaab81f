"""The executor that runs each control as a Slurm job and answers with its sealed outcome.

It answers the campaign loop as the local executor does (requests in, Outcomes out), with
up to `window` jobs in flight, a `same_host` group as one job, and up to `per_job` of a
slot's next controls in one job, each next run started early and waiting on the host's GPU
lock (`slurm.script`). A stop claims every run in flight not seen sealed (`slurm.claim`):
one the controller claimed never launches and is not run; one sealed as never launched
(its claim taken, or the run before it stopped the night) is not run either. The job `exec`s
`harness run --run-id R --attempt N`, so the run folder is the one the journal committed.
sbatch is sent once: after a transient failure the job is looked up by its token first.
The outcome is the sealed, verified run.json, never Slurm's word: Slurm's end only starts
a grace for the seal (a DOWN node went on to seal 11 s after NODE_FAIL); no seal by then
is `interrupted` (SLURM-NO-SEAL, the retry avoids that node), and a job that ended with no
run folder never started (ENV-SLURM-NO-EVIDENCE). Runs kept on hosts' own disks come home
through the drop (`Settings.fetch`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

from harness.base.catalogue import (
    ENV_SLURM_NO_EVIDENCE,
    ENV_SLURM_SUBMIT,
    SLURM_NIGHT_STOPPED,
    SLURM_NO_SEAL,
    SLURM_NOT_CLAIMED,
    SLURM_NOT_INTACT,
)
from harness.base.errors import EnvironmentFault, HarnessError
from harness.base.reason import Reason
from harness.base.states import Status
from harness.config.loader import Loaded
from harness.driver.cutoff import seal_left, status_of
from harness.driver.drive import crashed
from harness.driver.plan import LaunchRequest, Outcome
from harness.instrument.harness_observer.encode import loads
from harness.measure.runfolder import layout, runjson
from harness.measure.runfolder.manifest import verify_folder
from harness.measure.slurm import calls, claim, follow, job, query
from harness.measure.slurm.query import ENDED, Job, JobState
from harness.measure.ui import Reporter
from harness.pipeline.recover import seal_interrupted

SUBMIT_TRIES = 5
SETTLE_S = 5.0  # how long an sbatch a killed controller had started may take to land
NOT_LAUNCHED = frozenset({SLURM_NOT_CLAIMED, SLURM_NIGHT_STOPPED})  # sealed, never launched


@dataclass(frozen=True)
class Settings:
    """The night's side of every job: which night, where things are, how long to wait."""

    night: str  # the night folder's name: part of every job's token
    campaign_file: str
    site: job.Site
    lock_wait_s: float = 600.0
    until: datetime | None = None
    seal_grace_s: float = 120.0  # after Slurm's end, how long the host may take to seal
    lost_after_s: float = 30.0  # absent from every answer this long: ended (squeue forgets)
    poll_base_s: float = 1.0
    poll_ceiling_s: float = 30.0
    exclude_policy: str = "node-fail"
    env: Mapping[str, str] | None = None  # the Slurm clients' environment (SLURM_CONF)
    jobcomp: Path | None = None  # jobcomp/filetxt file, where there is no accounting
    use_sacct: bool = False
    # run id -> its verified bundle's arrival from the drop (None: nothing new), given by
    # the command line (bundles are a layer above) where hosts keep runs on local disks
    fetch: Callable[[str], Mapping[str, object] | None] | None = None


Members = Sequence[LaunchRequest] | LaunchRequest  # one control, or a same_host group's


def members(requests: Members) -> tuple[LaunchRequest, ...]:
    return (requests,) if isinstance(requests, LaunchRequest) else tuple(requests)


@dataclass
class Watch:
    """One job in flight: its requests, and what its follow-up has seen so far."""

    job_id: str
    requests: tuple[LaunchRequest, ...]
    token: str
    last: JobState | None = None
    ended: Job | None = None
    ended_at: float | None = None
    unknown_since: float | None = None
    failures: int = 0
    started: bool = False  # Slurm said RUNNING at least once
    cancelled: bool = False  # the controller scancelled it while pending (a stop)
    sealed_at: dict[str, float] = field(default_factory=dict)  # run id -> first seen sealed
    reported: set[str] = field(default_factory=set)  # run ids whose outcome was given
    fetched: set[str] = field(default_factory=set)  # run ids whose bundle the drop gave
    claimed: set[str] = field(default_factory=set)  # run ids the controller claimed: not run
    claims_made: bool = False  # the stop's claims were made for this job (once)

    def __post_init__(self) -> None:
        self.requests = members(self.requests)


def never_launched(outcome: Outcome) -> bool:
    """A run that held the lock but launched nothing because the night had stopped (its claim
    was the controller's, or the run before it stopped the night): its row is not run, not
    refused. Pure."""
    return outcome.status == Status.REFUSED and bool(outcome.reasons) \
        and all(r.rule in NOT_LAUNCHED for r in outcome.reasons)


def of_night(night: str, found: Job) -> bool:
    """Whether a job the jobcomp file lists is one of this night's (its name is a token of
    the night): the only jobs worth remembering between polls. Pure."""
    token = job.parse_token(found.name)
    return token is not None and token.night == night


def claim_decision(made: claim.Claim) -> bool:
    """Whether the controller, claiming a run in flight at a stop, withdraws it: only when it
    made the claim (the run can no longer launch). Taken: the host launched first and the run
    is followed to its seal; failed (the drop unwritable): followed too, as before claims,
    since the run itself cannot claim there either and so launches nothing. Pure."""
    return made is claim.Claim.MADE


class SlurmExecutor:
    """`start` submits one job; `poll` follows them all; outcomes are the seals'."""

    together = True  # a same_host group is one job

    def __init__(self, loaded: Loaded, ui: Reporter, settings: Settings, *,
                 on_submitted: Callable[[LaunchRequest, str, str], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time, window: int = 1,
                 per_job: int = 1) -> None:
        self.loaded, self.ui, self.settings = loaded, ui, settings
        self.window = window  # jobs submitted or running at once
        self.per_job = per_job  # a slot's controls one job carries, the next waiting on the lock
        self.on_submitted = on_submitted
        self.jobcomp = (calls.JobcompTail(settings.jobcomp, partial(of_night, settings.night))
                        if settings.jobcomp is not None else None)  # read on from poll to poll
        self.sleep, self.clock = sleep, clock
        self.excluded: dict[int, tuple[str, ...]] = {}  # plan slot -> nodes to avoid
        self.delay = settings.poll_base_s  # the pace of the batched status query

    def control_time(self, name: str) -> job.ControlTime:
        control, _ = self.loaded.controls[name]
        post_s = sum(p.timeout for p in control.post_steps)
        return job.ControlTime(control.name, control.timeout, control.stop_grace, post_s)

    def spec(self, requests: Members) -> job.JobSpec:
        """The job of one request, or of a same_host group's members in order (the token takes
        the first member's slot and the newest attempt). Pure."""
        group, s = members(requests), self.settings
        first = group[0]
        exclude = sorted({n for r in group for n in self.excluded.get(r.plan_index or 0, ())})
        one = len(group) == 1
        return job.JobSpec(
            night=s.night, campaign_file=s.campaign_file,
            controls=tuple(self.control_time(r.control) for r in group),
            slot=first.plan_index or 0, attempt=max(r.attempt for r in group),
            lock_wait_s=s.lock_wait_s, until=s.until, exclude=tuple(exclude),
            run_id=first.run_id if one else None,
            runs=() if one else tuple((r.run_id, r.attempt) for r in group),
            stop_policy=self.loaded.campaign.stop_policy)

    def launch(self, request: LaunchRequest) -> Outcome:
        """Submit one job and wait for its sealed outcome (a window of one)."""
        started = self.start(request)
        if isinstance(started, Outcome):
            return started
        watch = started
        outcome = self.wait(watch)[0][1]
        return outcome or self.unsealed(request, watch)

    def start(self, requests: Members) -> Watch | Outcome:
        """Submit one job (journaled, then announced): its Watch, or a failed outcome."""
        group = members(requests)
        try:
            spec = self.spec(group)
            token = job.token_of(spec)
            job_id = self.submit(spec, token)
        except HarnessError as e:
            return crashed(group[0], e)
        for request in group:
            if self.on_submitted is not None:  # journaled first, then announced
                self.on_submitted(request, token, job_id)
        self.ui.event("slurm-submitted", control=group[0].control, job_id=job_id, token=token,
                      controls=[r.control for r in group])
        return Watch(job_id, group, token)

    def resume(self, requests: Members, job_id: str | None,
               ) -> list[tuple[LaunchRequest, Outcome | None]]:
        """Follow the job of runs a dead controller left `running` (by journaled id, else
        token; duplicates cancelled) to each member's sealed outcome. None for a member no job
        carries and no seal covers: with a window it may never have been submitted."""
        group = members(requests)
        token = job.token_of(self.spec(group))
        found = self.find(token)
        if job_id is None and not found and not any(r.run_dir.exists() for r in group):
            self.sleep(SETTLE_S)  # an sbatch the dead controller started may still land
            found = self.find(token)
        if job_id is None and found:
            job_id = found[0].job_id
        extra = [j.job_id for j in found if j.job_id != job_id and j.state not in ENDED]
        if extra:
            calls.cancel(extra, env=self.settings.env)
            self.ui.event("slurm-duplicates-cancelled", token=token, job_ids=extra)
        if job_id is not None:
            self.ui.event("slurm-adopted", control=group[0].control, job_id=job_id,
                          controls=[r.control for r in group])
            return self.wait(Watch(job_id, group, token))
        return [(r, self.launched(self.sealed(r)) if (r.run_dir / layout.SUMS).is_file()
                 else None) for r in group]

    def preflight(self, control: str, runs_dir: Path) -> list[str]:
        """Nothing here: each GPU host runs `harness doctor` as Slurm's HealthCheckProgram
        (docs/slurm.md)."""
        return []

    def recover(self, requests: tuple[LaunchRequest, ...], job_id: str | None,
                ) -> list[tuple[LaunchRequest, Outcome | None]]:
        """`resume`; a member no job ran and no seal covers is sealed as found when its folder
        exists, and not run (None) when it has none."""
        out: list[tuple[LaunchRequest, Outcome | None]] = []
        for r, outcome in self.resume(requests, job_id):
            if outcome is None and r.run_dir.exists() and not self.sealed_unlaunched(r):
                control = self.loaded.controls.get(r.control)
                outcome = seal_left(r, control[0].stop_grace if control else 10.0, self.ui)
            out.append((r, outcome))
        return out

    def find(self, token: str) -> list[Job]:
        """The jobs carrying `token`, oldest first, from squeue and, where kept, the jobcomp
        file (squeue forgets ended jobs). Empty when every source fails."""
        p = calls.poll([token], [], jobcomp=self.jobcomp, env=self.settings.env)
        return query.by_name(p.jobs).get(token, [])

    def submit(self, spec: job.JobSpec, token: str) -> str:
        """sbatch once; after a transient failure, adopt a job carrying the token first."""
        for tries in range(SUBMIT_TRIES):
            if tries:
                found = self.find(token)
                if found:
                    extra = [j.job_id for j in found[1:] if j.state not in ENDED]
                    calls.cancel(extra, env=self.settings.env)
                    return found[0].job_id
            r = calls.submit(spec, self.settings.site, env=self.settings.env)
            if r.kind == "submitted" and r.job_id is not None:
                return r.job_id
            if r.kind != "transient":  # sbatch refused it: sending it again changes nothing
                raise EnvironmentFault(f"sbatch refused job {token}: {r.message}",
                                       rule=ENV_SLURM_SUBMIT)
            self.ui.event("slurm-submit-retry", token=token, message=r.message)
            self.sleep(min(30.0, 2.0 ** tries))
        raise EnvironmentFault(f"Slurm did not take job {token} after {SUBMIT_TRIES} tries",
                               rule=ENV_SLURM_SUBMIT)

    def wait(self, w: Watch) -> list[tuple[LaunchRequest, Outcome | None]]:
        """Poll until every member's outcome is known; them, in order (None: a run sealed as
        never launched; a cancel while pending follows only our own scancel, never sent
        here)."""
        got: list[tuple[LaunchRequest, Outcome | None]] = []
        while True:
            done, changed = self.poll([w])
            got += [(r, outcome if outcome is not None or self.sealed_unlaunched(r)
                     else self.unsealed(r, w)) for _, r, outcome in done]
            if len(got) == len(w.requests):
                return got
            self.pause(changed or w.ended_at is not None, w.failures)

    def poll(self, watches: list[Watch],
             ) -> tuple[list[tuple[Watch, LaunchRequest, Outcome | None]], bool]:
        """One batched status query for every job in flight: the members whose outcome is now
        known (None: cancelled while pending), and whether anything changed."""
        s = self.settings
        p = calls.poll([w.token for w in watches], [w.job_id for w in watches],
                       use_sacct=s.use_sacct, jobcomp=self.jobcomp, env=s.env)
        done: list[tuple[Watch, LaunchRequest, Outcome | None]] = []
        changed = False
        for w in watches:
            changed = self.observe(w, p, self.clock()) or changed
            done += [(w, r, outcome) for r, outcome in self.settle(w, self.clock())]
        return done, changed or bool(done)

    def pause(self, changed: bool, failures: int) -> None:
        """Sleep until the next batched query (follow.next_poll_s sets the pace)."""
        s = self.settings
        self.delay = follow.next_poll_s(self.delay, changed=changed, failures=failures,
                                       base_s=s.poll_base_s, ceiling_s=s.poll_ceiling_s)
        self.sleep(self.delay)

    def settle(self, w: Watch, now: float) -> list[tuple[LaunchRequest, Outcome | None]]:
        """The members of one job whose outcome is now known, in order, each given once; (member,
        None) for each member of a job cancelled before it started (none of them ran)."""
        left = [r for r in w.requests if r.run_id not in w.reported]
        cancelled = w.cancelled or (w.ended is not None  # Slurm's own --deadline (--until)
                                    and w.ended.raw_state.startswith("DEADLINE"))
        if cancelled and w.ended_at is not None and not w.started \
                and (w.ended is None or w.ended.node is None) \
                and not any(r.run_dir.exists() for r in left):
            w.reported.update(r.run_id for r in left)
            return [(r, None) for r in left]
        done: list[tuple[LaunchRequest, Outcome | None]] = []
        for r in [r for r in left if r.run_id in w.claimed]:  # never launches: not run
            w.reported.add(r.run_id)
            done.append((r, None))
        for r in [r for r in left if r.run_id not in w.claimed]:
            outcome = self.settle_member(w, r, now)  # in order: a member waits for the last
            if outcome is None:
                break
            w.reported.add(r.run_id)
            done.append((r, self.launched(outcome)))
        return done

    def launched(self, outcome: Outcome) -> Outcome | None:
        """The outcome of a run that launched; None for one sealed as never launched."""
        return None if never_launched(outcome) else outcome

    def sealed_unlaunched(self, request: LaunchRequest) -> bool:
        """Whether the run's folder is sealed as never launched (the night had stopped)."""
        return (request.run_dir / layout.SUMS).is_file() and never_launched(self.sealed(request))

    def settle_member(self, w: Watch, r: LaunchRequest, now: float) -> Outcome | None:
        """One member's outcome, or None while it is not known yet."""
        grace = self.settings.seal_grace_s
        if r.run_id not in w.sealed_at and self.settings.fetch is not None and w.started \
                and r.run_id not in w.fetched and not r.run_dir.exists():
            self.fetch(w, r)  # no bundle is real before its job ran; one judged is final
        if r.run_id not in w.sealed_at and (r.run_dir / layout.SUMS).is_file():
            w.sealed_at[r.run_id] = now
        at = w.sealed_at.get(r.run_id)
        later = w.requests[w.requests.index(r) + 1:]
        if at is not None and (w.ended_at is not None or now - at >= grace
                               or any(n.run_dir.exists() for n in later)):
            outcome = self.sealed(r)
            if outcome.status == Status.INTERRUPTED:  # the host sealed what Slurm cut off
                self.avoid(r, w)
            return outcome
        if w.ended_at is not None and follow.seal_overdue(w.ended_at, now, grace):
            return self.unsealed(r, w)
        return None

    def fetch(self, w: Watch, request: LaunchRequest) -> None:
        """Bring a run sealed on a host's own disk home from the drop. Once a bundle came, taken
        or refused, it is not asked for again: each ask hashes the whole bundle."""
        try:
            arrival = self.settings.fetch(request.run_dir.name)  # type: ignore[misc]
        except (HarnessError, OSError) as e:
            self.ui.event("bundle-collect-failed", control=request.control, problem=str(e))
            return
        if arrival is not None:
            w.fetched.add(request.run_id)
            self.ui.event("bundle-collected", control=request.control, **arrival)

    def cancel_pending(self, watches: list[Watch]) -> list[Watch]:
        """The night is stopping: claim every run in flight not seen sealed (`claim_runs`),
        then cancel the jobs not seen running, which only frees the queue: a job that started
        since the last poll finds its runs' claims taken and launches nothing."""
        self.claim_runs(watches)
        pending = [w for w in watches if not w.started and not w.cancelled
                   and w.ended_at is None]
        if not pending:
            return []
        for w in pending:
            w.cancelled = True
        problem = calls.cancel_pending([w.job_id for w in pending], env=self.settings.env)
        self.ui.event("slurm-cancelled-pending", job_ids=[w.job_id for w in pending],
                      controls=[r.control for w in pending for r in w.requests],
                      problem=problem)
        return pending

    def claim_runs(self, watches: list[Watch]) -> None:
        """Make the claim of every run of `watches` not seen sealed, once per job: made, the
        run can never launch and is not run, whatever Slurm says; already made, its host
        launched it first and it is followed to its seal."""
        claims = claim.claims_dir(job.drop_dir(self.settings.site))
        for w in watches:
            if w.claims_made:
                continue
            w.claims_made = True
            for r in w.requests:
                if r.run_id in w.reported or r.run_id in w.sealed_at:
                    continue
                made, where = claim.take(claims, r.run_id)
                if claim_decision(made):
                    w.claimed.add(r.run_id)
                elif made is claim.Claim.FAILED:
                    self.ui.event("slurm-claim-failed", control=r.control, problem=where)
            if w.claimed:
                self.ui.event("slurm-claimed", job_id=w.job_id,
                              controls=[r.control for r in w.requests if r.run_id in w.claimed])

    def observe(self, w: Watch, p: calls.Poll, now: float) -> bool:
        """Take one answer into `w`; True when the job's state changed."""
        found = p.jobs.get(w.job_id)
        w.failures = w.failures + 1 if p.errors and found is None else 0
        seen = found.state if found is not None else JobState.UNKNOWN
        if seen == JobState.UNKNOWN:
            if found is None and not p.live:  # the controller did not answer: no news
                return False
            w.unknown_since = w.unknown_since if w.unknown_since is not None else now
            if follow.lost(w.unknown_since, now, self.settings.lost_after_s) \
                    and w.ended_at is None:
                w.ended_at, w.ended = now, found
                self.ui.event("slurm-lost", job_id=w.job_id)
                return True
            return False
        w.unknown_since = None
        changed = seen != w.last
        w.last = seen
        w.started = w.started or seen == JobState.RUNNING or (seen in ENDED and bool(found.node))
        if seen in ENDED and w.ended_at is None:
            w.ended_at, w.ended = now, found
            self.ui.event("slurm-end", job_id=w.job_id, state=str(seen), node=found.node)
        elif seen == JobState.PENDING and w.ended_at is not None:  # requeued by the site
            w.ended_at = w.ended = None
        return changed

    def sealed(self, request: LaunchRequest) -> Outcome:
        """The outcome the sealed folder records, once it verifies."""
        problems = verify_folder(request.run_dir)
        if problems:
            text = "; ".join(str(p) for p in problems[:5])
            return Outcome.of(request.run_dir, Status.FAILED, [Reason(SLURM_NOT_INTACT, text)],
                              remote=True)
        rec = runjson.read(request.run_dir, loads)
        status = status_of(rec.status) if rec.status else Status.FAILED
        return Outcome.of(request.run_dir, status, (Reason.of(r) for r in rec.reasons),
                          remote=True)

    def unsealed(self, request: LaunchRequest, w: Watch) -> Outcome:
        """No seal within the grace: interrupted when Slurm ended or lost the job; an
        environment fault when it ended by itself and never made the run folder."""
        ended = w.ended.state if w.ended is not None else JobState.UNKNOWN
        node = w.ended.node if w.ended is not None else None
        where = f"job {w.job_id} ({ended}{', on ' + node if node else ''})"
        if ended == JobState.DONE and not request.run_dir.exists():
            home = f" (nor its bundle in {self.settings.site.drop}/bundles)" \
                if self.settings.fetch is not None else ""
            reason = Reason(ENV_SLURM_NO_EVIDENCE, f"{where} ended without a run folder at "
                            f"{request.run_dir}{home}; see {self.log_of(w)}")
            return Outcome.of(request.run_dir, Status.FAILED, [reason], remote=True)
        self.avoid(request, w)
        why = f"{where}: no sealed run after {self.settings.seal_grace_s:g} s"
        notes: list[Reason] = []
        if request.run_dir.is_dir():  # a shared runs folder: seal what the host left
            with contextlib.suppress(OSError, ValueError):
                notes = [Reason.of(r) for r in seal_interrupted(
                    request.run_dir, "the Slurm job ended before the run was sealed; sealed "
                                     "as found")[1]]
        return Outcome.of(request.run_dir, Status.INTERRUPTED,
                          [Reason(SLURM_NO_SEAL, why), *notes], remote=True)

    def avoid(self, request: LaunchRequest, w: Watch) -> None:
        """The retry of an interrupted attempt avoids a node Slurm lost (retry_exclude)."""
        if w.ended is None:
            return
        slot = request.plan_index or 0
        self.excluded[slot] = follow.retry_exclude(self.excluded.get(slot, ()), w.ended.node,
                                                  w.ended.state,
                                                  policy=self.settings.exclude_policy)

    def log_of(self, w: Watch) -> str:
        with contextlib.suppress(HarnessError):
            return job.log_path(self.settings.site, w.token).replace("%j", w.job_id)
        return "the job's log"


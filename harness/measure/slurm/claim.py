"""A run's claim in the drop, and the verdict of the run before it in its job.

A Slurm night starts a job's next `harness run` early, waiting on the host's GPU lock, and
may stop while runs wait there, queue in Slurm, or start between two polls. What keeps a
control from launching after the night stopped is one folder per run, `<drop>/claims/<run
id>`, made by `mkdir` (atomic, NFS included) by whichever side comes first: the run, once
it holds the GPU lock and before it creates its container, or the controller, when the
night stops, for every run it has not seen sealed. Made by the run: it launches. Made by
the controller: the run launches nothing, and its row goes back to planned.

The lock is released before the post-steps and the seal, so the run that takes it next
would launch before the last run's status is known. Under a stop policy it first waits for
the run before it in its job to exit and reads that run's seal: when that status stops the
night (or there is no seal to tell), it claims nothing.

The job script hands these over in the environment (`handover_of`); the values are the drop,
the runs folder and run ids, hostile like every value of a job, so each is checked."""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import ENVIRONMENT, InvalidInput
from harness.base.states import TERMINAL, Status
from harness.measure.slurm.values import ID_MAX, name, path

CLAIMS_DIR = "claims"  # <drop>/claims/<run id>
CLAIMS_ENV = "HARNESS_CLAIMS"  # the job's <drop>/claims
POLICY_ENV = "HARNESS_STOP_POLICY"  # the night's stop policy
AFTER_RUN_ENV = "HARNESS_AFTER_RUN"  # the run folder of the member before, in this job
AFTER_DONE_ENV = "HARNESS_AFTER_DONE"  # made by the job's shell once that member exited
LOCKED_ENV = "HARNESS_LOCKED_MARK"  # made by this run once it holds the GPU lock
STOP_POLICIES = ("continue", "stop-on-refusal", "stop-on-failure")  # driver.policy's
WAIT_STEP_S = 0.05
_FAILURES = frozenset(TERMINAL - {Status.ACCEPTED, Status.REFUSED})


class Claim(enum.Enum):
    """Who made a run's claim: this side (go on), the other side first, or nobody (the
    drop could not be written: a run launches nothing; the controller follows the run)."""

    MADE = "made"
    TAKEN = "taken"
    FAILED = "unwritable"


def claims_dir(drop: str) -> str:
    """`<drop>/claims`, the drop checked as every job value is."""
    return f"{path('drop', drop).rstrip('/')}/{CLAIMS_DIR}"


def claim_path(claims: str, run_id: str) -> str:
    """The claim of `run_id`: built from checked values only (no `..`, no separator)."""
    return f"{path('claims', claims).rstrip('/')}/{name('run id', run_id, ID_MAX)}"


def take(claims: str, run_id: str) -> tuple[Claim, str]:
    """Make the claim of `run_id` (its parent made first); who made it, and why when nobody.
    Never raises for the file system: a hostile drop is a FAILED claim."""
    where = claim_path(claims, run_id)
    try:
        os.makedirs(os.path.dirname(where), mode=0o775, exist_ok=True)
        os.mkdir(where, 0o775)
    except FileExistsError:
        return Claim.TAKEN, f"{where} was already made"
    except OSError as e:
        return Claim.FAILED, f"{where}: {e.strerror or errno.errorcode.get(e.errno or 0, e)}"
    return Claim.MADE, where


def stops_night(policy: str, status: Status, exit_code: int) -> bool:
    """Whether a run of this status stops the night (as `driver.policy.stop_reason` rules for
    a remote run: an environment fault stops every night, then the policy). Pure."""
    if policy not in STOP_POLICIES:
        raise InvalidInput(f"unknown stop policy {policy!r}")
    if exit_code == ENVIRONMENT:
        return True
    if policy == "stop-on-refusal":
        return status != Status.ACCEPTED
    if policy == "stop-on-failure":
        return status in _FAILURES
    return False


@dataclass(frozen=True)
class Handover:
    """What the job told this run: where claims go, the night's stop policy, and the member
    before it in its job (its run folder, and the file its exit makes)."""

    claims: str
    policy: str
    after_run: Path | None = None
    after_done: Path | None = None
    locked: Path | None = None

    @property
    def waits(self) -> bool:
        """Whether the verdict of the run before decides this one's claim."""
        return self.policy != "continue" and self.after_run is not None


def handover_of(environ: Mapping[str, str], run_dir: Path) -> Handover | None:
    """The job's handover to the run in `run_dir`, checked; None outside a claiming job.
    InvalidInput when a value is malformed, or the run before is not a sibling of this run's
    folder (a hostile value must not point the wait anywhere else)."""
    claims = environ.get(CLAIMS_ENV)
    if not claims:
        return None
    claims = path(CLAIMS_ENV, claims)
    policy = environ.get(POLICY_ENV, "continue")
    if policy not in STOP_POLICIES:
        raise InvalidInput(f"slurm job: {POLICY_ENV} must be one of {', '.join(STOP_POLICIES)}")
    mark = environ.get(LOCKED_ENV)
    locked = Path(path(LOCKED_ENV, mark)) if mark else None
    after, done = environ.get(AFTER_RUN_ENV), environ.get(AFTER_DONE_ENV)
    if not after:
        return Handover(claims, policy, locked=locked)
    before = Path(path(AFTER_RUN_ENV, after))
    name("run before", before.name, ID_MAX)
    if before.parent != Path(os.path.abspath(run_dir)).parent or before.name == run_dir.name:
        raise InvalidInput(f"slurm job: {AFTER_RUN_ENV} must name another run in "
                           f"{run_dir.parent}: {after[:200]!r}")
    return Handover(claims, policy, before,
                    Path(path(AFTER_DONE_ENV, done)) if done else None, locked)


def say_locked(handover: Handover) -> None:
    """Tell the job's shell this run holds the GPU lock, so it starts the next member, which
    then waits on the flock: an empty file, never a line to parse back. Best effort: a mark
    that cannot be made only delays the next member until this one exits."""
    if handover.locked is None:
        return
    with contextlib.suppress(OSError):
        os.close(os.open(handover.locked, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))


def wait_done(done: Path | None, step_s: float = WAIT_STEP_S) -> None:
    """Wait until the job's shell says the run before has exited (it then made `done`). The
    shell makes it after every exit, a signal's too, so the wait is bounded by that run's own
    timeouts; a signal to this run interrupts it as any other wait."""
    if done is None:
        return
    while not done.exists():
        time.sleep(step_s)

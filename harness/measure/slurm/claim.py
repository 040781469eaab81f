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
the runs folder and run ids, hostile like every value of a job, so each is checked. The drop
is shared, so what is in it is hostile too: a claim is made only in a claims folder that is
a folder of this user's (or root's), never through a symlink (one pointing at a host's own
disk would let the controller and the host each make "the" claim, and both go on); the job's
marks are made only where nothing is (a planted FIFO would block, a symlink lead elsewhere)."""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.stoprule import STOP_POLICIES
from harness.measure.slurm.values import ID_MAX, name, path

CLAIMS_DIR = "claims"  # <drop>/claims/<run id>
CLAIMS_ENV = "HARNESS_CLAIMS"  # the job's <drop>/claims
POLICY_ENV = "HARNESS_STOP_POLICY"  # the night's stop policy
AFTER_RUN_ENV = "HARNESS_AFTER_RUN"  # the run folder of the member before, in this job
AFTER_DONE_ENV = "HARNESS_AFTER_DONE"  # made by the job's shell once that member exited
LOCKED_ENV = "HARNESS_LOCKED_MARK"  # made by this run once it holds the GPU lock
WAIT_STEP_S = 0.05
ROOT = 0
# The job's shell names a member's mark `<member>.locked` in its own folder (mktemp -d): the
# one file a run makes for it, so a hostile value may name no other file to create.
_MARK = re.compile(r"[0-9]{1,3}\.locked")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MARK_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Claim(enum.Enum):
    """Who made a run's claim: this side (go on), the other side first, or nobody (the
    drop could not be written: a run launches nothing; the controller follows the run)."""

    MADE = "made"
    TAKEN = "taken"
    FAILED = "unwritable"


def claims_dir(drop: str) -> str:
    """`<drop>/claims`, the drop checked as every job value is."""
    return f"{path('drop', drop).rstrip('/')}/{CLAIMS_DIR}"


def _claims(label: str, claims: str) -> str:
    """A drop's claims folder, never any other folder a hostile value names."""
    checked = path(label, claims).rstrip("/")
    if os.path.basename(checked) != CLAIMS_DIR:
        raise InvalidInput(f"slurm job: {label} must name a drop's {CLAIMS_DIR}/ folder: "
                           f"{claims[:200]!r}")
    return checked


def claim_path(claims: str, run_id: str) -> str:
    """The claim of `run_id`: built from checked values only (a `claims/` folder; a run id,
    so no `..`, no separator)."""
    return f"{_claims('claims', claims)}/{name('run id', run_id, ID_MAX)}"


def _problem(e: OSError) -> str:
    return e.strerror or errno.errorcode.get(e.errno or 0, str(e))


def take(claims: str, run_id: str) -> tuple[Claim, str]:
    """Make the claim of `run_id` (the claims folder made first); who made it, and why when
    nobody. The claim is made beneath the claims folder opened once, never through a symlink,
    and only in a folder of this user's or root's: another user's could lose a claim (its
    owner may remove one). Never raises for the file system: a hostile drop is FAILED."""
    where = claim_path(claims, run_id)
    folder, claim = os.path.split(where)
    try:
        os.makedirs(folder, mode=0o775, exist_ok=True)
        fd = os.open(folder, _DIR_FLAGS)
    except OSError as e:
        why = "a symlink, never followed" if os.path.islink(folder) else _problem(e)
        return Claim.FAILED, f"{folder}: {why}"
    try:
        owner = os.fstat(fd).st_uid
        if owner not in (os.geteuid(), ROOT):
            return Claim.FAILED, f"{folder}: owned by uid {owner}, neither this user nor root"
        os.mkdir(claim, 0o775, dir_fd=fd)
    except FileExistsError:
        return Claim.TAKEN, f"{where} was already made"
    except OSError as e:
        return Claim.FAILED, f"{where}: {_problem(e)}"
    finally:
        os.close(fd)
    return Claim.MADE, where


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


def _mark(value: str) -> Path:
    mark = Path(path(LOCKED_ENV, value))
    if _MARK.fullmatch(mark.name) is None:
        raise InvalidInput(f"slurm job: {LOCKED_ENV} must name a <member>.locked file: "
                           f"{value[:200]!r}")
    return mark


def handover_of(environ: Mapping[str, str], run_dir: Path) -> Handover | None:
    """The job's handover to the run in `run_dir`, checked; None outside a claiming job.
    InvalidInput when a value is malformed, the run before is not a sibling of this run's
    folder (a hostile value must not point the wait anywhere else), the claims folder is not
    a drop's `claims/`, or the mark is not a `<member>.locked`: the folders and the file this
    run makes are never of a hostile value's choosing. The done file is only looked at."""
    claims = environ.get(CLAIMS_ENV)
    if not claims:
        return None
    claims = _claims(CLAIMS_ENV, claims)
    policy = environ.get(POLICY_ENV, "continue")
    if policy not in STOP_POLICIES:
        raise InvalidInput(f"slurm job: {POLICY_ENV} must be one of {', '.join(STOP_POLICIES)}")
    mark = environ.get(LOCKED_ENV)
    locked = _mark(mark) if mark else None
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
    then waits on the flock: an empty file, never a line to parse back. Made only where
    nothing is (O_EXCL): whatever was planted there (a FIFO, whose open would block with the
    lock held; a symlink; a file) is never opened. Best effort: a mark that cannot be made
    only delays the next member until this one exits."""
    if handover.locked is None:
        return
    with contextlib.suppress(OSError):
        os.close(os.open(handover.locked, _MARK_FLAGS, 0o600))


def _exited(done: Path) -> bool:
    """Whether the wait for `done` is over: it is there (whatever it is: never opened), or it
    can never be (its folder, the shell's, is gone: the shell exited, or the value named none;
    or the path cannot be looked up at all)."""
    try:
        os.stat(done, follow_symlinks=False)
    except FileNotFoundError:
        return not os.path.exists(done.parent)
    except OSError:
        pass
    return True


def wait_done(done: Path | None, step_s: float = WAIT_STEP_S) -> None:
    """Wait until the job's shell says the run before has exited (it then made `done`). The
    shell makes it after every exit, a signal's too, so the wait is bounded by that run's own
    timeouts, and by the job's TERM, which interrupts it as any other wait. Ending early never
    launches anything by itself: the seal of the run before, read next, is final, and none
    launches nothing."""
    if done is None:
        return
    while not _exited(done):
        time.sleep(step_s)

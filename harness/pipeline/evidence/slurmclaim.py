"""A Slurm night's claim on this run, the first thing under the GPU lock
(`measure.slurm.claim`): under a stop policy the verdict of the run before in its job, then
the claim in the drop. A reason refuses before anything is created, and the controller plans
the control again (`SLURM-NOT-CLAIMED`, `SLURM-NIGHT-STOPPED`). Outside a claiming job it
gathers nothing. A malformed handover raises: the runner refuses it under HARNESS-ERROR,
never as unclaimed, so a hostile job value cannot make the controller plan a control again
and again."""

from __future__ import annotations

import os
from pathlib import Path

from harness.base.catalogue import SLURM_NIGHT_STOPPED, SLURM_NOT_CLAIMED
from harness.base.readfile import read_fd
from harness.base.reason import Reason
from harness.base.states import Status, exit_code
from harness.base.stoprule import stops
from harness.base.tree import open_regular
from harness.instrument.harness_observer.encode import loads
from harness.measure.runfolder import layout, runjson
from harness.measure.slurm import claim
from harness.pipeline.evidence.source import LOCKED, Evidence, Gathered, Scene


def verdict_before(before: Path) -> tuple[Status, int] | None:
    """The sealed status (and its exit code) of the run before in this job; None when it
    left no seal to read (it is then unknown whether the night goes on). Its folder is
    opened without following a link: a link planted under its name would otherwise let a
    seal from anywhere decide that the night goes on."""
    try:
        folder = os.open(before, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        os.close(open_regular(layout.SUMS, dir_fd=folder))
        fd = open_regular(layout.RECORD, dir_fd=folder)
        try:
            text = read_fd(fd, runjson.RECORD_LIMIT)
        finally:
            os.close(fd)
        rec = runjson.strict(runjson.parse(text, str(before / layout.RECORD), loads), str(before))
        status = Status(rec.status) if rec.status else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(folder)
    return None if status is None else (status, exit_code(status, rec.reasons))


def _claim(scene: Scene) -> Gathered:
    ctx = scene.ctx
    handover = claim.handover_of(os.environ, ctx.run_dir)
    if handover is None:
        return Gathered()
    claim.say_locked(handover)  # the job starts its next member: it waits on this lock
    if handover.waits and handover.after_run is not None:
        claim.wait_done(handover.after_done)
        verdict = verdict_before(handover.after_run)
        if verdict is None or stops(handover.policy, *verdict) is not None:
            said = f"ended {verdict[0]}" if verdict else "left no seal"
            return Gathered(reasons=(Reason(
                SLURM_NIGHT_STOPPED, f"run {handover.after_run.name} before it {said}; under "
                f"{handover.policy} nothing more launches here"),))
    made, where = claim.take(handover.claims, ctx.run_id)
    if made is claim.Claim.MADE:
        return Gathered()
    why = ("the controller stopped the night first" if made is claim.Claim.TAKEN
           else "the claim could not be made")
    return Gathered(reasons=(Reason(SLURM_NOT_CLAIMED, f"{why}: {where}"),))


CLAIM = Evidence("slurm-claim", LOCKED, None, _claim, required=lambda _control: True)

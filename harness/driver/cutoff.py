"""What becomes of a run a dead harness left `running`: its container, its cut-off folder.

A night's resume asks its executor about each such row; here is what the executors do
with one whose folder the controller can reach.

The container of a harness killed with SIGKILL keeps running (the kernel frees the GPU
lock, not the GPU), so it is stopped first: it belongs to this night's own run id, and we
hold the night lock, so nobody else is driving it. Then the cut-off folder is cleaned
and sealed by `harness.pipeline.recover.seal_interrupted` (status `interrupted`; what the
workload planted is removed and listed, no existing file is rewritten). A folder that
cannot be sealed is reported in the reasons; it never stops the night's resume.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import docker.errors

from harness.base.catalogue import RUN_INTERRUPTED
from harness.base.reason import Reason
from harness.base.states import Status
from harness.driver.plan import LaunchRequest, Outcome
from harness.measure import engine, vector
from harness.measure.execute import stop_container
from harness.measure.ui import Reporter
from harness.pipeline.recover import seal_interrupted


def stop_run_containers(run_id: str, grace: float) -> list[str]:
    """Stop and remove the containers labelled with `run_id`; one note per container."""
    api = engine.client().api
    notes = []
    label = f"{vector.LABEL_PREFIX}.run-id={run_id}"
    for c in api.containers(all=True, filters={"label": label}):
        cid = c["Id"]
        how = stop_container(cid, grace) if c.get("State") == "running" else "had exited"
        try:
            state = api.inspect_container(cid)["State"]
            exit_code = state.get("ExitCode")
            api.remove_container(cid)
        except docker.errors.NotFound:
            exit_code = None
        except docker.errors.APIError as e:
            notes.append(f"container {cid}: could not remove it: {e}")
            continue
        notes.append(f"container {cid} was left by the dead harness: {how} at resume "
                     f"(exit code {exit_code}), then removed")
    return notes


def status_of(word: object) -> Status:
    """The status a sealed folder says it has; a word that is none (a folder edited by
    hand) is `failed`, as the journal has always recorded an unknown status."""
    try:
        return Status(word)
    except ValueError:
        return Status.FAILED


def seal_cut_off(run_dir: Path, notes: list[str]) -> Outcome:
    """Seal the folder of a run found `running` at resume; its outcome (`interrupted`)."""
    try:
        real = stat.S_ISDIR(os.lstat(run_dir).st_mode)
    except OSError:
        real = False
    left = [Reason(RUN_INTERRUPTED, n) for n in notes]
    if not real:
        return Outcome.of(run_dir, Status.INTERRUPTED, [
            Reason(RUN_INTERRUPTED, "the harness stopped before the run folder was created "
                   "(or it is not a real folder)"), *left])
    try:
        status, reasons = seal_interrupted(
            run_dir, "the harness stopped during this run (the night journal still said "
                     "`running` when the night resumed); the folder is sealed as found",
            tuple(notes))
    except (OSError, ValueError) as e:
        return Outcome.of(run_dir, Status.INTERRUPTED, [
            Reason(RUN_INTERRUPTED, "the harness stopped during this run; its folder could "
                   f"not be sealed ({type(e).__name__}: {e})"), *left])
    return Outcome.of(run_dir, status_of(status), (Reason.of(r) for r in reasons))


def seal_left(request: LaunchRequest, grace: float, ui: Reporter, *,
              stop_containers: bool = True) -> Outcome:
    """Stop the containers of a run a dead harness left (`stop_containers`: it has a run
    id of its own), seal its folder as found, and say so."""
    notes = stop_run_containers(request.run_id, grace) if stop_containers else []
    outcome = seal_cut_off(request.run_dir, notes)
    ui.event("recovered", run_id=request.run_id if stop_containers else None,
             status=outcome.status, dir=str(request.run_dir), notes=notes)
    return outcome

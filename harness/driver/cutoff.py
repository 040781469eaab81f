"""What becomes of a run a dead harness left `running`: its container, its cut-off folder.

A SIGKILLed harness's container keeps running (the kernel frees the lock, not the GPU), so
it is stopped first (it is this night's own run, under the night lock); then the folder is
sealed `interrupted` (`pipeline.recover.seal_interrupted`). A folder that cannot be sealed
is a reason, never a stop of the night's resume."""

from __future__ import annotations

from pathlib import Path

import docker.errors

from harness.base.catalogue import RUN_INTERRUPTED
from harness.base.reason import Reason
from harness.base.states import Status
from harness.driver.plan import LaunchRequest, Outcome
from harness.measure import engine, vector
from harness.measure.execute import stop_container
from harness.measure.ui import Reporter
from harness.pipeline.recover import is_real_dir, seal_interrupted


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
    """A sealed folder's status; a word that is none (edited by hand) is `failed`."""
    try:
        return Status(word)
    except ValueError:
        return Status.FAILED


def seal_cut_off(run_dir: Path, notes: list[str]) -> Outcome:
    """Seal the folder of a run found `running` at resume; its outcome (`interrupted`)."""
    left = [Reason(RUN_INTERRUPTED, n) for n in notes]
    if not is_real_dir(run_dir):
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
    """Stop a dead harness's run's containers, seal its folder as found, and say so."""
    notes = stop_run_containers(request.run_id, grace) if stop_containers else []
    outcome = seal_cut_off(request.run_dir, notes)
    ui.event("recovered", run_id=request.run_id if stop_containers else None,
             status=outcome.status, dir=str(request.run_dir), notes=notes)
    return outcome

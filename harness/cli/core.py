"""`harness run`: a campaign's controls, one at a time under the GPU lock, each sealed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from harness.base.errors import InvalidInput
from harness.base.names import RUN_ID_MAX, RunId
from harness.base.signals import received
from harness.base.states import Status
from harness.base.terminal import paint_statuses
from harness.cli.jsonout import Said, as_json_errors
from harness.cli.params import (
    JSON_LINES,
    color_option,
    lock_timeout_option,
    refuse_night,
    runs_dir_option,
)
from harness.cli.planprint import dry_run_options, needs_dry_run
from harness.cli.planprint import show as show_dry_run
from harness.config.loader import Loaded, require_campaign
from harness.config.suggest import hint
from harness.driver.drive import drive
from harness.driver.local import LocalExecutor
from harness.driver.night.nightlock import NightLock
from harness.driver.plan import PlanSource
from harness.measure.ui import Reporter, reporter
from harness.pipeline import orphans, recover
from harness.probe.approval.runcheck import before_run


@click.command()
@click.argument("campaign", type=click.Path(path_type=Path))
@click.option("--control", "only", multiple=True, help="run only this control (repeatable)")
@runs_dir_option("creates", help="where run folders go (DIR/<run-id>/)", campaign="campaign")
@lock_timeout_option()
@JSON_LINES
@click.option("--run-id", hidden=True, help="the run folder's name, chosen by a controller "
              "(a Slurm job of `harness night --executor slurm`); one control only")
@click.option("--attempt", type=click.IntRange(1, 999), default=1, hidden=True,
              help="the attempt number the controller's journal gave this run")
@dry_run_options
@color_option()
def run(campaign: Path, only: tuple[str, ...], runs_dir: Path, lock_timeout: float | None,
        json_lines: bool | None, run_id: str | None, attempt: int, dry_run: bool,
        as_json: bool, verbose: bool) -> None:
    """Run a campaign's controls, one at a time under the GPU lock, and seal each run.

    Waits for a night on this GPU lock before each control. SIGTERM or SIGHUP stops the
    container and seals the run `interrupted` (exit 1); Ctrl-C too, exiting 130 (a second
    kills it at once). Prints `STATUS: RUN_DIR` per run and `not executed: CONTROL: WHY`
    for each one a stop left unrun. --dry-run launches nothing."""
    needs_dry_run(verbose, dry_run)
    if dry_run:  # with --json, an error too is the one JSON object (as night and rerun)
        with as_json_errors(as_json, command="run", campaign=str(campaign)):
            loaded, plan, _ = _planned(campaign, only, run_id)
            code = show_dry_run(loaded, plan, Path(runs_dir), command="run", as_json=as_json,
                                 verbose=verbose)
        raise click.exceptions.Exit(code)
    said = Said(as_json, command="run", campaign=str(campaign))
    with as_json_errors(as_json, **said.doc):
        loaded, plan, chosen = _planned(campaign, only, run_id)
        if chosen is None:  # refused before any folder exists; a night's own launch is sealed
            before_run(loaded, Path(runs_dir))
        # made now, not with the first run folder: `status --runs-dir` answers while a run
        # still waits for the lock (checked creatable: its parent exists)
        Path(runs_dir).mkdir(exist_ok=True)
        ui = reporter(json_lines)
        try:
            worst = _run_plan(loaded, plan, Path(runs_dir), lock_timeout, ui, said,
                              run_id=chosen, attempt=attempt)
        finally:
            ui.close()
    raise click.exceptions.Exit(said.end(worst))


def _planned(campaign: Path, only: tuple[str, ...],
             run_id: str | None) -> tuple[Loaded, list, RunId | None]:
    """The loaded campaign, the plan of the controls asked for, and the run id chosen."""
    refuse_night(campaign, "a campaign file")
    loaded = require_campaign(campaign)
    for n in only:
        if n not in loaded.controls:
            raise InvalidInput(f"{campaign}: no control {n!r}{hint(n, set(loaded.controls))} "
                               f"(it has: {', '.join(loaded.controls)})")
    plan = loaded.plan(list(only))
    if run_id is None:
        return loaded, plan, None
    chosen = _one_run(plan, run_id)
    return loaded, plan[:1], chosen


def after_night(loaded: Loaded, ui: Reporter, timeout: float) -> Callable[[], None]:
    """Before each control, wait (up to the lock timeout, then exit 3) until no night
    holds this GPU lock's night lock, so a run never slips between a night's controls;
    not held during the control, so operators' runs still take turns at the GPU lock."""
    def wait() -> None:
        gate = NightLock(loaded.lock_path, kind="run", campaign=loaded.campaign.name)
        try:
            gate.acquire(timeout=timeout, on_wait=ui.waiting)
        finally:
            gate.release()
    return wait


def outcome_line(status: Status, run_dir: Path) -> str:
    """`STATUS: RUN_DIR`, an interrupted run naming the signal that stopped it."""
    by = f" (by {received()})" if status == Status.INTERRUPTED and received() else ""
    return f"{status}: {run_dir}{by}"


def _one_run(plan: list, run_id: str) -> RunId:
    """--run-id names one run folder: the plan must be one control, and the id one of
    its run ids. A control the campaign repeats is still one run here: the controller that
    chose the id (a Slurm job's) plans each repeat as a run of its own."""
    controls = sorted({control for control, _ in plan})
    if len(controls) != 1:
        raise InvalidInput(f"--run-id names one run, but the plan has {len(controls)} "
                           "controls: give exactly one --control")
    if not RunId.valid(run_id) or not RunId(run_id).of_control(plan[0][0]):
        raise InvalidInput(f"--run-id {run_id[:120]!r} must be <control>-<letters, digits, . "
                           f"_ ->, at most {RUN_ID_MAX} characters")
    return RunId.parse(run_id)


def _run_plan(loaded: Loaded, plan: list, runs_dir: Path, lock_timeout: float | None,
              ui: Reporter, said: Said, *, run_id: RunId | None = None, attempt: int = 1
              ) -> int:
    """Recover what a killed harness left in RUNS_DIR, then drive the plan; the worst code."""
    sealed = recover.seal_orphans(
        Path(runs_dir), still_running=orphans.running_run_ids(),
        on_deferred=lambda d: ui.event("recovery-deferred", dir=str(d),
                                       why="its container still runs; sealed once it exits"))
    for d in sealed:
        ui.event("recovered", dir=str(d), status=Status.INTERRUPTED)
    # A run whose id a controller chose is that night's own launch (a Slurm job): it must
    # not wait for the night that is waiting for it.
    wait = None if run_id is not None else after_night(
        loaded, ui, lock_timeout or loaded.campaign.lock_timeout)
    executor = LocalExecutor(loaded, ui, lock_timeout=lock_timeout, before_launch=wait,
                             wait_first=True)
    driven = drive(PlanSource(plan, runs_dir, run_id=run_id, attempt=attempt), executor,
                   stop_policy=loaded.campaign.stop_policy, ui=ui, raise_errors=True,
                   on_outcome=lambda o: said.run(
                       o.status, o.run_dir, paint_statuses(outcome_line(o.status, o.run_dir))))
    for n in driven.not_executed:  # the end lines name what the stop left unrun, and why
        ui.event("not-executed", control=n.slot.control, repeat_index=n.slot.repeat_index,
                 why=n.why)
        said.unrun(n.slot.control, n.why, f"not executed: {n.line()}")
    return driven.worst

"""The core commands: run, images, model (check, verify and show have their own modules)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.base.catalogue import ENV_MISSING_IMAGE
from harness.base.errors import ENVIRONMENT, EnvironmentFault, InvalidInput
from harness.base.names import RUN_ID_MAX, RunId
from harness.base.states import Status
from harness.cli.dryrun import DRY_RUN_HELP, JSON_HELP, needs_dry_run
from harness.cli.dryrun import show as show_dry_run
from harness.cli.jsonout import as_json_errors, emit
from harness.cli.params import DURATION, runs_dir_option
from harness.cli.targets import refuse_night
from harness.config.loader import Loaded, require_campaign
from harness.config.suggest import hint
from harness.driver.drive import drive
from harness.driver.local import LocalExecutor
from harness.driver.night.nightlock import NightLock
from harness.driver.plan import PlanSource
from harness.measure.ui import Reporter, reporter
from harness.pipeline import orphans, recover
from harness.probe.approval.check import before_run


@click.command()
@click.argument("campaign", type=click.Path(path_type=Path))
@click.option("--control", "only", multiple=True, help="run only this control (repeatable)")
@runs_dir_option("creates", help="where run folders go (DIR/<run-id>/)", campaign="campaign")
@click.option("--lock-timeout", type=DURATION, help="how long to wait for the GPU lock, "
              "e.g. 600 or 2h (default: the campaign's lock_timeout)")
@click.option("--json-lines/--no-json-lines", default=None,
              help="progress as JSON lines (default: when stderr is not a terminal)")
@click.option("--run-id", hidden=True, help="the run folder's name, chosen by a controller "
              "(a Slurm job of `harness night --executor slurm`); one control only")
@click.option("--attempt", type=click.IntRange(1, 999), default=1, hidden=True,
              help="the attempt number the controller's journal gave this run")
@click.option("--dry-run", is_flag=True, help=DRY_RUN_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def run(campaign: Path, only: tuple[str, ...], runs_dir: Path, lock_timeout: float | None,
        json_lines: bool | None, run_id: str | None, attempt: int, dry_run: bool,
        as_json: bool) -> None:
    """Run a campaign's controls, one at a time under the GPU lock, and seal each run.

    Like `rerun`, it waits for a night on this GPU lock to finish (up to the lock
    timeout) before each control, so it never slips between a night's controls.

    SIGTERM or SIGHUP stops the container, releases the lock once it has exited and seals
    the run `interrupted` (exit 1). Ctrl-C does the same and exits 130; a second Ctrl-C
    kills the container at once instead of waiting out its stop_grace.

    Each sealed run prints `STATUS: RUN_DIR`; a campaign its stop_policy (or a signal)
    stopped then prints `not executed: CONTROL: WHY` for each control it left unrun.

    --dry-run prints what would run and what would be refused, and launches nothing."""
    needs_dry_run(as_json, dry_run)
    if dry_run:  # with --json, an error too is the one JSON object (as night and rerun)
        with as_json_errors(as_json, command="run", campaign=str(campaign)):
            loaded, plan, _ = _planned(campaign, only, run_id)
            code = show_dry_run(loaded, plan, Path(runs_dir), command="run", as_json=as_json)
        raise click.exceptions.Exit(code)
    loaded, plan, chosen = _planned(campaign, only, run_id)
    if chosen is None:  # refused before any folder exists; a night's own launch is sealed
        before_run(loaded, Path(runs_dir))
    # made now, not with the first run folder: `status --runs-dir` answers while a run
    # still waits for the lock (checked creatable: its parent exists)
    Path(runs_dir).mkdir(exist_ok=True)
    ui = reporter(json_lines)
    try:
        worst = _run_plan(loaded, plan, Path(runs_dir), lock_timeout, ui,
                          run_id=chosen, attempt=attempt)
    finally:
        ui.close()
    raise click.exceptions.Exit(worst)


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
    return loaded, plan, None if run_id is None else _one_run(plan, run_id)


class AfterNight:
    """Before each control, wait until no night (or operator rerun) holds this GPU lock's
    night lock, as `rerun` does (up to the lock timeout, then exit 3, nothing launched):
    a `run` never slips between a night's controls. The night lock is not kept during
    the control, so two operators' runs still take turns control by control at the GPU
    lock, and a night that starts meanwhile waits only for the control in progress
    (harness/driver/night/nightlock.py)."""

    def __init__(self, loaded: Loaded, ui: Reporter, timeout: float) -> None:
        self.loaded, self.ui, self.timeout = loaded, ui, timeout

    def __call__(self) -> None:
        gate = NightLock(self.loaded.lock_path, kind="run", campaign=self.loaded.campaign.name)
        try:
            gate.acquire(timeout=self.timeout, on_wait=self.ui.waiting)
        finally:
            gate.release()


def _one_run(plan: list, run_id: str) -> RunId:
    """--run-id names one run folder: the plan must be one control, and the id one of
    its run ids."""
    if len(plan) != 1:
        raise InvalidInput(f"--run-id names one run, but the plan has {len(plan)}: "
                           "give exactly one --control (and a campaign without repeats)")
    if not RunId.valid(run_id) or not RunId(run_id).of_control(plan[0][0]):
        raise InvalidInput(f"--run-id {run_id[:120]!r} must be <control>-<letters, digits, . "
                           f"_ ->, at most {RUN_ID_MAX} characters")
    return RunId.parse(run_id)


def _run_plan(loaded: Loaded, plan: list, runs_dir: Path, lock_timeout: float | None,
              ui: Reporter, *, run_id: RunId | None = None, attempt: int = 1) -> int:
    """Recover what a killed harness left in RUNS_DIR, then drive the plan; the worst code."""
    sealed = recover.seal_orphans(
        Path(runs_dir), still_running=orphans.running_run_ids(),
        on_deferred=lambda d: ui.event("recovery-deferred", dir=str(d),
                                       why="its container still runs; sealed once it exits"))
    for d in sealed:
        ui.event("recovered", dir=str(d), status=Status.INTERRUPTED)
    # A run whose id a controller chose is that night's own launch (a Slurm job): it must
    # not wait for the night that is waiting for it.
    wait = None if run_id is not None else AfterNight(
        loaded, ui, lock_timeout or loaded.campaign.lock_timeout)
    executor = LocalExecutor(loaded, ui, lock_timeout=lock_timeout, before_launch=wait,
                             wait_first=True)
    driven = drive(PlanSource(plan, runs_dir, run_id=run_id, attempt=attempt), executor,
                   stop_policy=loaded.campaign.stop_policy, ui=ui, raise_errors=True,
                   on_outcome=lambda o: click.echo(f"{o.status}: {o.run_dir}"))
    for n in driven.not_executed:  # the end lines name what the stop left unrun, and why
        ui.event("not-executed", control=n.slot.control, repeat_index=n.slot.repeat_index,
                 why=n.why)
        click.echo(f"not executed: {n.line()}")
    return driven.worst


@click.group()
def images() -> None:
    """Pin and verify image Ids in images.lock."""


@images.command("pin")
@click.argument("name")
@click.argument("ref")
@click.option("--lock-file", type=click.Path(path_type=Path), default="images.lock",
              show_default=True)
@click.option("--replace", is_flag=True, help="replace NAME's pin with another Id "
              "(needs --reason)")
@click.option("--reason", metavar="TEXT", help="why the pin is replaced: one line, kept in "
              "the entry's history with the old and new Ids, the time and the user")
@click.option("--archive", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE.tar",
              help="the `docker save` archive of REF: its sha256 is recorded (after checking "
              "that it holds that Id), so doctor can say `docker load -i FILE.tar`")
@click.option("--build", metavar="COMMAND", help="a command that rebuilds this Id "
              "reproducibly (recorded as advice, never run), e.g. 'make image'")
def images_pin(name: str, ref: str, lock_file: Path, replace: bool, reason: str | None,
               archive: Path | None, build: str | None) -> None:
    """Record the Id of the local image REF under NAME.

    A new NAME is pinned; the same Id again changes nothing (exit 0). Another Id for a
    pinned NAME is refused (exit 1) unless --replace --reason TEXT: then the old and new
    Ids are printed and the change is appended to the entry's `history`. An --archive
    that does not hold that Id: exit 1, nothing recorded. Bad NAME, REF or option text:
    exit 2; REF not in the local engine: exit 3 (no registry is used).
    """
    from harness.measure import images as image_lock  # here: `run` does not load the pin writer

    decision = image_lock.pin(lock_file, name, ref, replace=replace, reason=reason,
                              archive=archive, build=build)
    for line in decision.describe(name):
        click.echo(line)


@images.command("verify")
@click.argument("names", nargs=-1)
@click.option("--lock-file", type=click.Path(path_type=Path), default="images.lock",
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout: ok, "
              "exit_code, and per image its name, pinned Id, local Id and advice")
def images_verify(names: tuple[str, ...], lock_file: Path, as_json: bool) -> None:
    """Check images.lock entries (all, or NAMES) against the local engine.

    Exit 3 if any is absent or has another Id; each such line says how to obtain the
    pinned image (its archive, repo digest or build), never to re-pin. Exit 2 for a bad
    images.lock or a NAME it does not pin."""
    from harness.measure import images as image_lock

    with as_json_errors(as_json, lock_file=str(lock_file)):
        lock = image_lock.read(lock_file)
        unknown = [n for n in names if n not in lock.images]
        if unknown:
            raise InvalidInput(f"{lock_file}: no entry {', '.join(map(repr, unknown))}"
                               f"{hint(unknown[0], set(lock.images))}")
        chosen = {n: p for n, p in lock.images.items() if not names or n in names}
        checks = [image_lock.check_one(name, pinned) for name, pinned in sorted(chosen.items())]
    bad = sum(not c.ok for c in checks)
    if as_json:
        emit({"ok": not bad, "exit_code": ENVIRONMENT if bad else 0, "lock_file": str(lock_file),
              "images": [{"name": c.name, "ok": c.ok, "pinned": c.expected, "local": c.found,
                          "advice": None if c.ok else c.advice} for c in checks]})
        raise click.exceptions.Exit(ENVIRONMENT if bad else 0)
    for c in checks:
        click.echo(("ok    " if c.ok else "FAIL  ") + c.describe())
    if bad:
        raise EnvironmentFault(f"{bad} of {len(chosen)} pinned image(s) not present "
                               "with their pinned Id", rule=ENV_MISSING_IMAGE)


@click.group()
def model() -> None:
    """Pin the files of a model folder."""


@model.command("pin")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False, exists=True))
def model_pin(folder: Path) -> None:
    """Print the `sha256:` mapping of every file under FOLDER, to paste into a control."""
    from harness.base.hashing import sha256_many
    from harness.base.tree import NotRegular, kind_of
    from harness.measure.seal import files_under

    names = files_under(folder)
    if not names:
        raise InvalidInput(f"{folder}: no files to pin")
    special = []  # a FIFO would block the hash, a device never end: name them, read none
    for n in names:
        try:
            mode = (folder / n).stat().st_mode
        except OSError as e:
            special.append(f"{folder / n}: {e.strerror or e}")
            continue
        if kind_of(mode) != "file":
            special.append(f"{folder / n}: is a {kind_of(mode)}, not a regular file")
    if special:
        raise InvalidInput(f"{folder}: a model folder holds only regular files "
                           f"({len(special)} other)", faults=special)
    try:  # follows symlinks as the preflight's model check does (snapshot symlink farms)
        digests = sha256_many((folder / n for n in names), follow_symlinks=True)
    except NotRegular as e:  # swapped in after the check above: still never read
        raise InvalidInput(f"{e.filename}: {e.strerror}; not pinned") from None
    except OSError as e:
        raise InvalidInput(f"{e.filename or folder}: cannot read: {e.strerror or e}") from None
    click.echo("sha256:")
    for n in names:
        click.echo(f"  {json.dumps(n)}: {digests[folder / n]}")


ALL = [run, images, model]

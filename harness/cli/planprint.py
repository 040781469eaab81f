"""`--dry-run` (and `--dry-run --json`) of `run`, `night` and `rerun`: print the plan that
`harness.driver.dryrun` walks, every line inert (control names, paths and holder records
come from files), and its exit code: 0 every control would launch, 1 one would be refused.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.base.errors import HarnessError
from harness.base.timeutil import iso
from harness.cli.jsonout import emit, fault_doc
from harness.config.loader import Loaded
from harness.readers.report.inert import inert

if TYPE_CHECKING:  # the dry run's module is loaded only by a dry run
    from harness.driver.dryrun import DryRun
    from harness.driver.rerun import RerunPlan

DRY_RUN_HELP = ("print the plan, one line a control (image Id, lock, timeout, what the "
                "preflight would refuse), the runs dir and the source seal; launch nothing, "
                "create nothing (exit 0 would launch, 1 would refuse)")
JSON_HELP = ("the result as one JSON object on stdout (runs, status, exit code; the lines go "
             "to stderr); with --dry-run, the plan")
VERBOSE_HELP = "with --dry-run: each control's docker argv too"


def dry_run_options(f):  # type: ignore[no-untyped-def]
    """`--dry-run`, `--json` and `-v` as run, night and rerun all take them."""
    for option in (click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP),
                   click.option("--json", "as_json", is_flag=True, help=JSON_HELP),
                   click.option("--dry-run", is_flag=True, help=DRY_RUN_HELP)):
        f = option(f)
    return f


def needs_dry_run(verbose: bool, dry_run: bool) -> None:
    """`-v` shapes the dry run's output: alone it is a usage error (exit 2)."""
    if verbose and not dry_run:
        raise click.UsageError("-v/--verbose goes with --dry-run")


def show(loaded: Loaded, rows: list[tuple[str, int]], runs_dir: Path, *, command: str,
         as_json: bool, verbose: bool = False) -> int:
    from harness.driver import dryrun  # here: a real run never loads it

    found = dryrun.plan(loaded, rows, runs_dir, command=command)
    say(found, as_json=as_json, verbose=verbose)
    return found.exit_code


def say(found: DryRun, *, as_json: bool, extra: dict | None = None,
        verbose: bool = False) -> None:
    """Print a gathered dry run: its lines, each made inert (names, paths and holder
    records come from files), or its one JSON object (ASCII only)."""
    if as_json:
        emit({**found.document(), **(extra or {})})
    else:
        for line in found.lines(verbose):
            click.echo(inert(line, 20_000))


def show_night(loaded: Loaded, runs_dir: Path, *, local: bool, as_json: bool,
               night: str | None = None, new: bool = False,
               deadline: datetime | None = None, verbose: bool = False) -> int:
    """The dry run of a night: the controls this start would run, in order (the whole
    plan in a new night, what is left of the night it would continue), with the doctor's
    host check before each control when the night runs here."""
    from harness.driver import dryrun

    executor = dryrun.DryExecutor(loaded, runs_dir, doctor=local)
    pick = dryrun.night_walk(loaded, runs_dir, night, new, executor)
    notes = (*dryrun.night_notes(loaded, runs_dir, pick),
             *([f"no control would start after {iso(deadline)}"] if deadline else []),
             "the doctor checks the host before each control" if local else
             "each control would be a Slurm job: the doctor runs on the host Slurm picks")
    found = executor.dry_run("night", notes)
    say(found, as_json=as_json, extra={"night": pick.document()}, verbose=verbose)
    return found.exit_code


def show_rerun(run_dirs: list[Path], campaign: Path | None, runs_dir: Path | None, *,
               as_json: bool, failed: bool = False, verbose: bool = False) -> int:
    """The dry run of each rerun: the plan `rerun` prints, then the control's dry run; the
    worst exit code. With `failed`, one that cannot be planned is said and the next follows."""
    from harness.base.stoprule import environment_stops
    from harness.driver import dryrun

    docs, worst = [], 0
    for run_dir in run_dirs:
        try:
            doc, code = _rerun_dry(run_dir, campaign, runs_dir, as_json=as_json,
                                   verbose=verbose)
        except HarnessError as e:
            if not failed:
                raise
            if not as_json:
                click.echo(inert(f"error: {run_dir}: {e.message}", 2000))
            doc, code = {"rerun_of": str(run_dir), **fault_doc(e)}, e.code
        docs.append(doc)
        worst = max(worst, code)
        if environment_stops(code):
            break
    if as_json:
        emit({"schema": dryrun.SCHEMA, "command": "rerun", "reruns": docs,
              "would_launch": not worst, "exit_code": worst})
    return worst


def _rerun_dry(run_dir: Path, campaign: Path | None, runs_dir: Path | None, *,
               as_json: bool, verbose: bool = False) -> tuple[dict, int]:
    """One rerun's dry run: printed (without `as_json`), and its document and exit code."""
    from harness.driver import dryrun
    from harness.driver.rerun import plan_rerun

    plan = plan_rerun(run_dir, campaign=campaign)
    into = runs_dir if runs_dir is not None else plan.run_dir.parent
    found = dryrun.plan(plan.loaded, [(plan.control, 0)], into, command="rerun",
                        notes=tuple(plan_lines(plan)))
    if not as_json:
        say(found, as_json=False, verbose=verbose)
    return {**found.document(), "rerun_of": str(plan.run_dir)}, found.exit_code


def plan_lines(plan: RerunPlan) -> list[str]:
    """What a rerun uses, as `rerun` and its dry run both say it: the original, the files,
    the source seal against the original's."""
    from harness.driver.rerun import seal_lines

    return [f"rerun of: {plan.run_dir} ({plan.original.status})",
            *(f"uses: {path}" for path in plan.files()),
            f"seal: {plan.seal.digest} (original {plan.original.seal})", *seal_lines(plan)]

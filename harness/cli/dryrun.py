"""`--dry-run` (and `--dry-run --json`) of `run`, `night` and `rerun`: print the plan.

The plan itself is gathered in `harness.driver.dryrun`; here it is only printed, every
line inert (control names, paths and holder records come from files), and turned into
the exit code: 0 every control would launch, 1 one would be refused.
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.jsonout import emit
from harness.config.loader import Loaded
from harness.readers.report.inert import inert

DRY_RUN_HELP = ("print the plan (controls in order, image Ids, runs dir, lock), the source "
                "seal, each control's docker argv and what the preflight would refuse; "
                "launch nothing, create nothing (exit 0 would launch, 1 would refuse)")
JSON_HELP = "with --dry-run: the plan as one JSON object on stdout"


def needs_dry_run(as_json: bool, dry_run: bool) -> None:
    """`--json` means the dry run's document: alone it is a usage error (exit 2)."""
    if as_json and not dry_run:
        raise click.UsageError("--json goes with --dry-run")


def show(loaded: Loaded, rows: list[tuple[str, int]], runs_dir: Path, *, command: str,
         as_json: bool, notes: tuple[str, ...] = (), doctor: bool = False) -> int:
    """Print the dry run of `rows` and return its exit code."""
    from harness.driver import dryrun  # here: a real run never loads it

    found = dryrun.plan(loaded, rows, runs_dir, command=command, notes=notes, doctor=doctor)
    if as_json:
        emit(found.document())
    else:
        for line in found.lines():
            click.echo(inert(line, 20_000))
    return found.exit_code


def show_night(loaded: Loaded, runs_dir: Path, *, local: bool, as_json: bool) -> int:
    """The dry run of a night: the campaign's whole plan, with the doctor's host check
    before each control when the night runs here."""
    notes = (f"a night folder would go to {Path(runs_dir) / 'nights'}/ (or the latest "
             "unfinished night of this campaign would be continued)",
             "the doctor checks the host before each control" if local else
             "each control would be a Slurm job: the doctor runs on the host Slurm picks")
    return show(loaded, loaded.plan(), runs_dir, command="night", as_json=as_json,
                notes=notes, doctor=local)


def show_rerun(run_dirs: list[Path], campaign: Path | None, runs_dir: Path | None, *,
               as_json: bool) -> int:
    """The dry run of each rerun (one, or `--failed`'s): the plan `rerun` prints, then the
    control's dry run; the worst exit code."""
    from harness.driver import dryrun
    from harness.driver.rerun import plan_rerun, seal_lines

    docs, worst = [], 0
    for run_dir in run_dirs:
        plan = plan_rerun(run_dir, campaign=campaign)
        into = runs_dir if runs_dir is not None else plan.run_dir.parent
        said = [f"rerun of: {plan.run_dir} ({plan.original.status})",
                f"seal: {plan.seal.digest} (original {plan.original.seal})", *seal_lines(plan)]
        found = dryrun.plan(plan.loaded, [(plan.control, 0)], into, command="rerun",
                            notes=tuple(said))
        worst = max(worst, found.exit_code)
        if as_json:
            docs.append({**found.document(), "rerun_of": str(plan.run_dir)})
        else:
            for line in found.lines():
                click.echo(inert(line, 20_000))
    if as_json:
        emit({"schema": dryrun.SCHEMA, "command": "rerun", "reruns": docs,
              "would_launch": not worst, "exit_code": worst})
    return worst

"""`harness night` and `harness rerun` (`harness status` is harness/cli/status.py)."""

from __future__ import annotations

import os
import shlex
from datetime import datetime
from pathlib import Path

import click

from harness.base.errors import HarnessError
from harness.base.stoprule import environment_stops
from harness.base.terminal import paint_statuses
from harness.cli.core import outcome_line
from harness.cli.display import night_reporter
from harness.cli.jsonout import Said, as_json_errors, fault_doc
from harness.cli.params import (
    DURATION,
    HOURS,
    JSON_LINES,
    NIGHT,
    RUN,
    color_option,
    lock_timeout_option,
    refuse_night,
    runs_dir_option,
)
from harness.cli.planprint import (
    dry_run_options,
    needs_dry_run,
    plan_lines,
    show_night,
    show_rerun,
)
from harness.config.executor import (
    KINDS,
    MAX_RUNS_PER_JOB,
    RUNS_PER_JOB,
    ExecutorConfig,
    merged,
)
from harness.config.loader import Loaded, require_campaign
from harness.driver.night.rules import night_deadline
from harness.driver.night.runner import NightResult, run_night
from harness.driver.policy import ENDED_ON_PURPOSE
from harness.driver.rerun import (
    check_reason,
    execute,
    night_failures,
    plan_rerun,
    sealed_with,
)
from harness.measure.nightfolder.journal import settle
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.ui import Reporter, reporter
from harness.probe.approval.runcheck import before_run
from harness.readers.bundle.collect import collect_run
from harness.readers.hook.atnightend import Night, after_night
from harness.readers.report.ending import night_end_lines
from harness.readers.report.inert import inert
from harness.readers.report.morning import SUMMARY_FILES, write_night_summary

WAIT_DEFAULT = "12h"  # a bare --wait: one night's length, so a timer's night is not lost


@click.command("night")
@click.argument("campaign", type=click.Path(path_type=Path))
@click.option("--until", metavar="HH:MM",
              help="local wall-clock time after which no new control starts")
@click.option("--max-hours", type=HOURS,
              help="hours from now after which no control starts (at most 720)")
@click.option("--window", metavar="HH:MM-HH:MM",
              help="local times: start only inside this window, and no control starts after "
                   "its end; a start outside it starts nothing (exit 1)")
@runs_dir_option("creates", help="run folders; nights live in RUNS_DIR/nights/",
                 campaign="campaign")
@click.option("--night", "night_name", metavar="NAME_OR_DIR",
              help="continue this night folder (default: the campaign's latest, if unfinished)")
@click.option("--new", is_flag=True, help="start a new night even if the latest is unfinished")
@click.option("--wait", type=DURATION, is_flag=False, flag_value=WAIT_DEFAULT,
              metavar="[=DURATION]",
              help="when another night holds this GPU lock, wait up to DURATION for it "
                   "(bare --wait: 12h; never past --until/--max-hours/--window) instead of "
                   "exit 3 at once")
@lock_timeout_option()
@JSON_LINES
@click.option("--executor", "executor_kind", type=click.Choice(KINDS),
              help="where controls run: local (here) or slurm (one job each; default: the "
                   "campaign's executor.kind, else local)")
@click.option("--partition", help="Slurm partition (sbatch --partition)")
@click.option("--account", help="Slurm account (sbatch --account)")
@click.option("--drop", type=click.Path(path_type=Path),
              help="shared folder for job scripts and logs (default: RUNS_DIR/slurm)")
@click.option("--jobs", type=click.IntRange(1, 10_000),
              help="Slurm jobs submitted or running at once (default: the campaign's "
                   "executor.window, else 4)")
@click.option("--runs-per-job", type=click.IntRange(1, MAX_RUNS_PER_JOB),
              help="Slurm: a slot's next controls one job runs, each next `harness run` "
                   "started early and waiting on the host's GPU lock, so the GPU does not "
                   "wait for the scheduler (default: the campaign's executor.runs_per_job, "
                   f"else {RUNS_PER_JOB})")
@dry_run_options
@color_option()
def night(campaign: Path, until: str | None, max_hours: float | None, window: str | None,
          runs_dir: Path, night_name: str | None, new: bool, wait: float | None,
          lock_timeout: float | None,
          json_lines: bool | None, executor_kind: str | None, partition: str | None,
          account: str | None, drop: Path | None, jobs: int | None,
          runs_per_job: int | None, dry_run: bool,
          as_json: bool, verbose: bool) -> None:
    """Run a whole campaign unattended, journaled so it can resume after a crash.

    The night folder is RUNS_DIR/nights/<campaign>-<UTC stamp>/ (journal, summaries).
    Starting the campaign again continues its latest unfinished night: sealed
    runs are never repeated. The doctor checks the host before each control (a failing
    host defers it). --until/--max-hours/--window bound this start only; one night at a
    time per GPU lock. --executor slurm runs each control as one Slurm job
    (docs/slurm.md); a campaign `hook:` is told the night's summary at its end
    (docs/scheduling.md). --dry-run prints what this start would run and creates nothing.

    Exit codes: 0 every control accepted; 1 any refused, failed, timed out, interrupted or
    left unrun, or a start outside --window; 2 invalid campaign or options; 3 environment
    (another night holds the lock past --wait, a deferred control, lock timeout, no
    engine, a damaged journal); 130 Ctrl-C. The control in progress is sealed `interrupted`.
    """
    needs_dry_run(verbose, dry_run)
    with as_json_errors(as_json, command="night", campaign=str(campaign)):
        loaded = require_campaign(campaign)
        executor = merged(loaded.executor, kind=executor_kind, partition=partition,
                          account=account, drop=None if drop is None else os.path.abspath(drop),
                          window=jobs, runs_per_job=runs_per_job)
        if dry_run:  # the start's own checks first: --night/--new, --until, --window
            deadline = night_deadline(datetime.now().astimezone(), until, max_hours, window)
            raise click.exceptions.Exit(show_night(
                loaded, Path(runs_dir), local=executor.kind == "local", as_json=as_json,
                night=night_name, new=new, deadline=deadline, verbose=verbose))
    said = Said(as_json, command="night", campaign=str(campaign))
    with as_json_errors(as_json, **said.doc):
        code = _night(loaded, executor, Path(runs_dir), json_lines, said, until=until,
                      max_hours=max_hours, night=night_name, new=new,
                      lock_timeout=lock_timeout, window=window, wait=wait or 0.0)
    raise click.exceptions.Exit(code)


def _night(loaded: Loaded, executor: ExecutorConfig, runs_dir: Path, json_lines: bool | None,
           said: Said, **kw) -> int:
    """The night itself (`run_night`'s keywords in `kw`), said as it ends; its exit code."""
    before_run(loaded, runs_dir)  # no approval: refused before any night or run folder
    ui = night_reporter(loaded.campaign.name, json_lines, total=len(loaded.plan()))
    try:
        result = run_night(loaded, runs_dir=runs_dir, ui=ui, summarize=write_night_summary,
                           executor=executor, fetch=_fetch, **kw)
    finally:
        ui.close()
    resume = shlex.join(["harness", "night", str(loaded.campaign_file), "--runs-dir",
                         os.path.abspath(runs_dir)]) if result.resumable else None
    _say_night(result, resume, said)
    if loaded.hook is not None and result.why in ENDED_ON_PURPOSE:  # once, the night over
        _hook(loaded, result, runs_dir, said)
    return said.end(result.exit_code, night=str(result.night_dir), why=str(result.why),
                    signal=result.signal, resume=resume,
                    summary=[str(p) for p in result.summary])  # whatever the hook did


def _hook(loaded: Loaded, result: NightResult, runs_dir: Path, said: Said) -> None:
    """The campaign's hook, told of the night that ended; its failures go to stderr."""
    told = after_night(loaded.hook, Night(
        loaded.campaign.name, result.night_dir, Path(os.path.abspath(runs_dir)),
        str(result.why), result.exit_code, loaded.project_dir), os.environ)
    for line in told.said:
        said.line(line)
    for line in told.failed:
        click.echo(line, err=True)


def _say_night(result: NightResult, resume: str | None, said: Said) -> None:
    """Each run the night sealed, its folder and why it stopped (the signal that stopped
    it), and what to do next: start it again to resume, rerun what ended, read it."""
    for status, run_dir in result.runs:
        said.run(status, run_dir, paint_statuses(outcome_line(status, run_dir)))
    for n in result.not_executed:
        said.doc["not_executed"].append({"control": n.slot.control, "why": n.why})
    by = f" by {result.signal}" if result.signal else ""
    said.line(f"night: {result.night_dir} ({result.why}{by}, exit code {result.exit_code})")
    for line in night_end_lines(result.night_dir, result.summary, resume, result.retried):
        said.line(paint_statuses(line))


def _fetch(drop: Path, runs_dir: Path, run_id: str) -> dict | None:
    """A run sealed on a host's own disk, home from the drop as its job ends."""
    arrival = collect_run(drop, runs_dir, run_id)
    return None if arrival is None else arrival.record()


def _rerun_one(run_dir: Path, reason: str, ui: Reporter, said: Said, *, ending: bool = True,
               **kw) -> int:
    """One rerun, said as it goes; with `ending`, a night's run ends as the night does."""
    campaign, night_dir = kw.pop("campaign"), kw.pop("night", None)
    plan = plan_rerun(run_dir, campaign=campaign)
    for line in plan_lines(plan):  # inert: the original's values come from its folder
        said.line(inert(line, 2000))
    result = execute(plan, reason, ui=ui, night=night_dir, summarize=write_night_summary, **kw)
    sealed = sealed_with(result.run_dir)
    if sealed is not None and sealed != plan.seal.digest:
        said.line(inert(f"note: the rerun sealed {sealed}, not the seal above: a file changed "
                        "while it ran (`harness diff` the two runs names it)", 2000))
    said.run(result.status, result.run_dir,
             paint_statuses(outcome_line(result.status, result.run_dir)))
    said.doc["runs"][-1]["rerun_of"] = run_dir.name
    if result.night:
        said.doc["night"] = str(result.night)
        said.line(f"night: {result.night}")
        settle(result.night / JOURNAL_NAME)  # the summary was its last reader
        if ending:
            for line in night_end_lines(result.night, result.summary):
                said.line(paint_statuses(line))
    return result.exit_code


def _rerun_failed(night_dir: Path, reason: str, ui: Reporter, said: Said, **kw) -> int:
    said.doc["night"] = str(night_dir)
    todo = night_failures(night_dir)
    if not todo:
        said.line(_nothing_to_rerun(night_dir))
        return 0
    worst = 0
    for run_dir in todo:
        try:
            worst = max(worst, _rerun_one(run_dir, reason, ui, said, night=night_dir,
                                          ending=False, **kw))
        except HarnessError as e:  # this one is recorded (or never started); go on
            said.line(inert(f"error: {run_dir}: {e.message}", 2000))
            said.doc.setdefault("errors", []).append({"run_dir": str(run_dir),
                                                      **fault_doc(e)})
            worst = max(worst, e.code)
            if environment_stops(e.code):  # the host is not fit: the next would fail too
                break
    written = [night_dir / name for name in SUMMARY_FILES.values()
               if (night_dir / name).is_file()]
    for line in night_end_lines(night_dir, written):  # once, after the last rerun
        said.line(paint_statuses(line))
    return worst  # each rerun rewrote the night's summary files as its row changed


def _nothing_to_rerun(night_dir: Path) -> str:
    return (f"nothing to rerun: no newest attempt in {night_dir} is refused, failed, "
            "timed-out or interrupted")


def _dry_rerun(run_dir: Path | None, night_dir: Path | None, campaign: Path | None,
               runs_dir: Path | None, as_json: bool, verbose: bool) -> int:
    """`rerun --dry-run`: the plan of each rerun, nothing launched, locked or written."""
    with as_json_errors(as_json, command="rerun"):
        todo = [run_dir] if run_dir is not None else night_failures(night_dir)
        if not todo and not as_json:
            click.echo(_nothing_to_rerun(night_dir))
        return show_rerun(todo, campaign, runs_dir, as_json=as_json,
                          failed=night_dir is not None, verbose=verbose)


@click.command("rerun")
@click.argument("run_dir", required=False, type=RUN)
@click.option("--failed", "night_dir", metavar="NIGHT", type=NIGHT,
              help="rerun every refused, failed, timed-out or interrupted newest attempt of "
                   "this night (its summary files are rewritten after each)")
@click.option("--reason", required=True, help="why the control is run again (recorded)")
@click.option("--campaign", type=click.Path(path_type=Path, dir_okay=False),
              help="read the control from this campaign file (default: the original's "
                   "recorded campaign file, as it is on disk now)")
@runs_dir_option("optional", help="where the new run folder goes, and where a run id is "
                 "looked up")
@lock_timeout_option("the night and GPU locks", "")
@JSON_LINES
@dry_run_options
@color_option()
def rerun(run_dir: Path | None, night_dir: Path | None, reason: str, campaign: Path | None,
          runs_dir: Path | None, lock_timeout: float | None, json_lines: bool | None,
          dry_run: bool, as_json: bool, verbose: bool) -> None:
    """Run RUN's control again as a new attempt, linked both ways to the original.

    The control is read from the campaign file as it is in the checkout now (the one the
    original recorded, or --campaign), so a fix is what runs. It prints the files and
    source seal it uses and whether that seal changed against the original's. The
    original stays as sealed; the link goes to reruns.jsonl and the night's journal and
    summaries. RUN may be a folder, a run id, a unique prefix, `latest` or `@-1` (`harness
    ls`). --failed NIGHT (a folder, night id, prefix or `latest`) reruns each newest
    attempt of the night that did not pass.
    --dry-run launches nothing and writes nothing.

    Exit codes as `harness run`; with --failed, the worst of the reruns (0 when there was
    nothing to rerun), stopping at the first environment fault.
    """
    needs_dry_run(verbose, dry_run)
    if (run_dir is None) == (night_dir is None):
        raise click.UsageError("give either RUN or --failed NIGHT")
    check_reason(reason)
    if run_dir is not None:
        refuse_night(run_dir, "a run folder")
    if dry_run:
        raise click.exceptions.Exit(_dry_rerun(run_dir, night_dir, campaign, runs_dir, as_json,
                                                   verbose))
    said = Said(as_json, command="rerun")
    kw = {"campaign": campaign, "runs_dir": runs_dir, "lock_timeout": lock_timeout}
    with as_json_errors(as_json, **said.doc):
        ui = reporter(json_lines)
        try:
            code = (_rerun_one(run_dir, reason, ui, said, **kw) if run_dir is not None
                    else _rerun_failed(night_dir, reason, ui, said, **kw))
        finally:
            ui.close()
    raise click.exceptions.Exit(said.end(code))

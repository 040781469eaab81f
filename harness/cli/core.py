"""The core commands: check, run, verify, show, images."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from harness import images as image_lock
from harness.config.loader import check_files, require_campaign
from harness.config.schema import SAFE_NAME
from harness.errors import EnvironmentFault, InvalidInput
from harness.pipeline import recover
from harness.pipeline.run import make_context, run_control
from harness.seal import verify_folder
from harness.show import render_run
from harness.ui import reporter
from harness.verdict import exit_code

RUNS_DIR = "gpu-runs"


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def check(files: tuple[Path, ...]) -> None:
    """Validate campaigns, controls and image locks without launching anything.

    Prints every fault as FILE:LINE:COL: message. Exit 0 when valid, 2 when not.
    """
    faults = check_files(list(files))
    if faults:
        raise InvalidInput(f"{len(faults)} fault(s)", faults=[str(f) for f in faults])
    click.echo(f"ok: {len(files)} file(s) valid")


@click.command()
@click.argument("campaign", type=click.Path(path_type=Path))
@click.option("--control", "only", multiple=True, help="run only this control (repeatable)")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=RUNS_DIR, show_default=True)
@click.option("--lock-timeout", type=float, help="seconds to wait for the GPU lock "
              "(default: the campaign's lock_timeout)")
@click.option("--json-lines/--no-json-lines", default=None,
              help="progress as JSON lines (default: when stderr is not a terminal)")
def run(campaign: Path, only: tuple[str, ...], runs_dir: Path, lock_timeout: float | None,
        json_lines: bool | None) -> None:
    """Run a campaign's controls, one at a time under the GPU lock, and seal each run."""
    loaded = require_campaign(campaign)
    names = list(only)
    for n in names:
        if n not in loaded.controls:
            raise InvalidInput(f"{campaign}: no control {n!r} (it has: "
                               f"{', '.join(loaded.controls)})")
    plan = loaded.plan(names)
    ui = reporter(json_lines)
    worst = 0
    for d in recover.seal_orphans(Path(runs_dir)):
        ui.event("recovered", dir=str(d), status="interrupted")
    try:
        for name, _ in plan:
            ctx = make_context(loaded, name, runs_dir, ui)
            status, reasons = run_control(ctx, lock_timeout=lock_timeout)
            click.echo(f"{status}: {ctx.run_dir}")
            code = exit_code(status, reasons)
            worst = max(worst, code)
            if code == 3 or status == "interrupted" or ctx.stop_requested:
                break
            policy = loaded.campaign.stop_policy
            if (policy == "stop-on-refusal" and status != "accepted") or (
                    policy == "stop-on-failure" and status in ("failed", "timed-out")):
                ui.event("stop-policy", policy=policy, status=status)
                break
    finally:
        ui.close()
    raise click.exceptions.Exit(worst)


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
def verify(run_dir: Path) -> None:
    """Re-hash a sealed run folder. Exit 0 intact, 1 naming each changed/missing/extra file."""
    if not run_dir.is_dir():
        raise InvalidInput(f"{run_dir}: not a folder")
    problems = verify_folder(run_dir)
    for p in problems:
        click.echo(f"{run_dir}/{p}", err=True)
    if problems:
        click.echo(f"FAILED: {len(problems)} problem(s) in {run_dir}")
        raise click.exceptions.Exit(1)
    click.echo(f"OK: {run_dir} is intact")


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print run.json as is")
def show(run_dir: Path, as_json: bool) -> None:
    """Print a readable summary of a run folder."""
    try:
        record = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError) as e:
        raise InvalidInput(f"{run_dir}: no readable run.json ({e})") from None
    if as_json:
        click.echo(json.dumps(record, indent=2, sort_keys=True))
    else:
        render_run(run_dir, record)


@click.group()
def images() -> None:
    """Pin and verify image Ids in images.lock."""


@images.command("pin")
@click.argument("name")
@click.argument("ref")
@click.option("--lock-file", type=click.Path(path_type=Path), default="images.lock",
              show_default=True)
def images_pin(name: str, ref: str, lock_file: Path) -> None:
    """Record the Id of the local image REF under NAME."""
    if not re.match(SAFE_NAME, name):
        raise InvalidInput(f"image name {name!r} must match {SAFE_NAME}")
    entry = image_lock.pin(lock_file, name, ref)
    click.echo(f"{name}: {entry.id} ({ref}, store {entry.store})")


@images.command("verify")
@click.argument("names", nargs=-1)
@click.option("--lock-file", type=click.Path(path_type=Path), default="images.lock",
              show_default=True)
def images_verify(names: tuple[str, ...], lock_file: Path) -> None:
    """Check images.lock entries (all, or NAMES) against the local engine.

    Exit 3 if any is absent or has another Id."""
    lock = image_lock.read(lock_file)
    unknown = [n for n in names if n not in lock.images]
    if unknown:
        raise InvalidInput(f"{lock_file}: no entry {', '.join(map(repr, unknown))}")
    bad = 0
    chosen = {n: p for n, p in lock.images.items() if not names or n in names}
    for name, pinned in sorted(chosen.items()):
        c = image_lock.check_one(name, pinned)
        click.echo(("ok    " if c.ok else "FAIL  ") + c.describe())
        bad += not c.ok
    if bad:
        raise EnvironmentFault(f"{bad} of {len(chosen)} pinned image(s) not present "
                               "with their pinned Id", rule="ENV-MISSING-IMAGE")


@click.group()
def model() -> None:
    """Pin the files of a model folder."""


@model.command("pin")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False, exists=True))
def model_pin(folder: Path) -> None:
    """Print the `sha256:` mapping of every file under FOLDER, to paste into a control."""
    from harness.hashing import sha256_many
    from harness.seal import files_under

    names = files_under(folder)
    if not names:
        raise InvalidInput(f"{folder}: no files to pin")
    digests = sha256_many(folder / n for n in names)
    click.echo("sha256:")
    for n in names:
        click.echo(f"  {json.dumps(n)}: {digests[folder / n]}")


ALL = [check, run, verify, show, images, model]

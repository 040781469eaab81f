"""`harness doctor`: check that this host can run controls; exit 0 when nothing fails."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from harness.doctor import Check, any_failed, run_checks
from harness.doctor.report import render_json, render_plain, render_table
from harness.errors import InvalidInput


def default_lock() -> Path:
    return Path(os.environ.get("HOME", "~")).expanduser() / "gpu.lock"


def load_expected_images(path: Path) -> dict[str, dict[str, Any]] | None:
    """images.lock as {name: {"id", "ref", "store", and the source fields recorded}}.

    None when the file does not exist. The source (archive, repo digest, build) goes
    through, so a miss is explained with how to obtain that image, never with "re-pin".

    A file that exists but is malformed is invalid input (exit 2), not a sick host.
    """
    if not path.exists():
        return None
    from harness.config.loader import load_model
    from harness.config.schema import ImageLock

    lock, _doc, faults = load_model(path, ImageLock)
    if faults or lock is None:
        raise InvalidInput(f"{path}: not a valid images.lock", faults=[str(f) for f in faults])
    source = {"archive", "repo_digest", "build"}
    return {
        name: {"id": img.id, "ref": img.ref, "store": img.store,
               **img.model_dump(include=source, exclude_none=True)}
        for name, img in lock.images.items()
    }


@click.command("doctor")
@click.option(
    "--lock",
    "lock_path",
    type=click.Path(path_type=Path),
    default=None,
    help="GPU lock file to check for writability (default: $HOME/gpu.lock).",
)
@click.option(
    "--runs-dir",
    type=click.Path(path_type=Path),
    default=Path("gpu-runs"),
    show_default=True,
    help="Folder that will hold run folders; checked for free disk.",
)
@click.option(
    "--images-lock",
    type=click.Path(path_type=Path),
    default=Path("images.lock"),
    show_default=True,
    help="images.lock whose every image must be present by Id.",
)
@click.option(
    "--profile",
    type=click.Choice(["rocm", "cpu"]),
    default="rocm",
    show_default=True,
    help="Device profile: on 'cpu' a missing GPU is a warning, not a failure.",
)
@click.option(
    "--gfx",
    "required_gfx",
    default=None,
    metavar="TARGET",
    help="Required gfx target (e.g. gfx1100); a host without it fails.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(
    lock_path: Path | None,
    runs_dir: Path,
    images_lock: Path,
    profile: str,
    required_gfx: str | None,
    as_json: bool,
) -> None:
    """Check the Docker engine, locked images, GPU devices and tools, the lock path and disk.

    Each check prints one line: ok, warn or fail. Exit 0 when nothing fails, 1 otherwise.
    """
    expected = load_expected_images(images_lock)
    checks = run_checks(
        lock_path=lock_path or default_lock(),
        runs_dir=runs_dir,
        images=expected,
        profile=profile,
        required_gfx=required_gfx,
    )
    if expected is None:
        checks.insert(
            1, Check("images", "fail", f"{images_lock} not found: no image can be verified")
        )
    if as_json:
        click.echo(render_json(checks), nl=False)
    elif sys.stdout.isatty():
        width = shutil.get_terminal_size((120, 24)).columns
        click.echo(render_table(checks, width=width), nl=False)
    else:
        click.echo(render_plain(checks), nl=False)
    if any_failed(checks):
        raise click.exceptions.Exit(1)

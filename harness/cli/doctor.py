"""`harness doctor [CAMPAIGN]`: check that this host can run controls (all of them, or one
campaign's); exit 0 when nothing fails."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from harness.base.errors import InvalidInput
from harness.cli.params import default_lock, lock_option, runs_dir_option
from harness.config.gpumapfile import load_map, map_path
from harness.config.loader import load_model, require_campaign
from harness.config.schema import ImageLock
from harness.judge.doctor.checks import GIB, Check, any_failed
from harness.judge.doctor.table import render_json, render_plain, render_table
from harness.measure.slurm import calls
from harness.probe.doctor.allchecks import run_checks
from harness.probe.doctor.gpufacts import node_name


def load_expected_images(path: Path) -> dict[str, dict[str, Any]] | None:
    """images.lock as {name: {"id", "ref", "store", and its source fields}}; None when
    missing. The source goes through so a miss says how to obtain the image, never to
    re-pin; a malformed file is invalid input (exit 2), not a sick host."""
    if not path.exists():
        return None
    lock, _doc, faults = load_model(path, ImageLock)
    if faults or lock is None:
        raise InvalidInput(f"{path}: not a valid images.lock", faults=[str(f) for f in faults])
    source = {"archive", "repo_digest", "build"}
    return {
        name: {"id": img.id, "ref": img.ref, "store": img.store,
               **img.model_dump(include=source, exclude_none=True)}
        for name, img in lock.images.items()
    }


@dataclass
class Scope:
    """What the doctor checks: every pinned image on the `profile` (no campaign), or only
    the images, lock, GPU profile, gfx and free disk a campaign's controls need."""

    images: dict[str, dict[str, Any]] | None
    images_lock: Path
    lock_path: Path
    profile: str
    required_gfx: str | None
    fail_free_bytes: int = 1 * GIB
    skip_gpu: str | None = None  # why the GPU lines are one `skip` line


def campaign_scope(campaign: Path, profile: str | None, gfx: str | None,
                   lock_path: Path | None) -> Scope:
    """The campaign's own needs, as a night's doctor checks them before each control
    (images, profile, lock, gfx, free disk); command-line options win. Exit 2 for a
    campaign that does not check."""
    loaded = require_campaign(campaign)
    pins = loaded.image_lock.images if loaded.image_lock else {}
    controls = [ctl for ctl, _ in loaded.controls.values()]
    # an image the lock does not pin yet is named too, as a failure (judge_images)
    images = {c.image: pins[c.image].model_dump() if c.image in pins else {}
              for c in controls}
    devices = {c.device for c in controls}
    fail_bytes = int(loaded.campaign.host.min_free_gib * GIB)
    gpu_free = profile is None and "rocm" not in devices  # --profile cpu: checked, as warnings
    return Scope(images=images, images_lock=loaded.image_lock_file or Path("images.lock"),
                 lock_path=lock_path or loaded.lock_path,
                 profile=profile or ("rocm" if "rocm" in devices else "cpu"),
                 required_gfx=gfx or loaded.campaign.host.gfx, fail_free_bytes=fail_bytes,
                 skip_gpu="the campaign runs on the cpu profile" if gpu_free else None)


@click.command("doctor")
@click.argument("campaign", required=False, type=click.Path(path_type=Path))
@lock_option("GPU lock file to check for writability (default: the campaign's lock, "
             "else $HOME/gpu.lock)")
@runs_dir_option("any", help="Folder that will hold run folders; checked for free disk",
                 campaign="campaign")
@click.option("--images-lock", type=click.Path(path_type=Path), default=None,
              help="images.lock whose every image must be present by Id (default: "
              "images.lock; with CAMPAIGN, the campaign's, and only its controls' images).")
@click.option("--profile", type=click.Choice(["rocm", "cpu"]), default=None,
              help="Device profile: on 'cpu' a missing GPU is a warning, not a failure "
              "(default: rocm; with CAMPAIGN, rocm when one of its controls runs on the GPU, "
              "else cpu and the GPU checks skipped).")
@click.option("--gfx", "required_gfx", default=None, metavar="TARGET",
              help="Required gfx target (e.g. gfx1100); a host without it fails (default: "
              "the campaign's host.gfx).")
@click.option("--gpu-map", "gpu_map", type=click.Path(path_type=Path), default=None,
              help="The host's GPU map (Slurm GPU index -> render node) to check (default: "
              "$HARNESS_GPU_MAP, else /etc/harness/gpu-map.yaml; checked when it exists, "
              "required on a Slurm node).")
@click.option("--gres-conf", "gres_conf", type=click.Path(path_type=Path), default=None,
              help="gres.conf to compare the GPU map with (default: beside $SLURM_CONF, "
              "else /etc/slurm/gres.conf).")
@click.option("--slurm-health", "slurm_health", is_flag=True,
              help="Slurm's HealthCheckProgram mode: the GPU map is required; when a check "
              "fails, drain this node (scontrol update State=DRAIN Reason=...) and exit "
              "non-zero; otherwise exit 0 and print nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(campaign: Path | None, lock_path: Path | None, runs_dir: Path,
           images_lock: Path | None, profile: str | None, required_gfx: str | None,
           gpu_map: Path | None, gres_conf: Path | None, slurm_health: bool,
           as_json: bool) -> None:
    """Check the Docker engine, locked images, GPU devices, map and tools, the lock and disk.

    With CAMPAIGN, only what its controls need. One line per check: ok, warn, fail or
    skip. Exit 0 when nothing fails, 1 otherwise, 2 for a campaign, images.lock or GPU map
    that does not check. With --slurm-health (Slurm's HealthCheckProgram) a failing check
    drains this node, says why on stderr and exits 1 (3 when the drain failed); a fit node
    exits 0 silently (docs/slurm.md).
    """
    scope = (campaign, lock_path, runs_dir, images_lock, profile, required_gfx, gpu_map,
             gres_conf)
    if not slurm_health:
        checks = _checks(*scope, strict_map=False)
        _print(checks, as_json)
        if any_failed(checks):
            raise click.exceptions.Exit(1)
        return
    try:
        checks = _checks(*scope, strict_map=True)
    except InvalidInput as e:
        text = "; ".join([e.message, *e.faults])
        _drain_and_exit([Check("input", "fail", text)], 2)
    if any_failed(checks):
        _drain_and_exit(checks, 1)


def _drain_and_exit(checks: list[Check], code: int) -> None:
    """Say what failed on stderr, drain this node with that as the reason, exit `code`
    (3 when Slurm did not take the drain)."""
    failing = [c for c in checks if c.status == "fail"]
    click.echo(render_plain(failing), nl=False, err=True)
    node = node_name(os.environ)
    reason = "harness doctor: " + "; ".join(f"{c.name}: {c.detail}" for c in failing)
    try:
        problem = calls.drain(node, reason)
    except InvalidInput as e:
        problem = e.message
    if problem is not None:
        click.echo(f"harness doctor: could not drain node {node}: {problem}", err=True)
        raise click.exceptions.Exit(3)
    click.echo(f"harness doctor: drained node {node}", err=True)
    raise click.exceptions.Exit(code)


def _checks(campaign: Path | None, lock_path: Path | None, runs_dir: Path,
            images_lock: Path | None, profile: str | None, required_gfx: str | None,
            gpu_map: Path | None, gres_conf: Path | None, *, strict_map: bool) -> list[Check]:
    """Every check of the scope the options and the campaign give. Bad input raises
    InvalidInput (exit 2): a campaign, images.lock or a named GPU map that does not check."""
    if not strict_map:  # an invalid map is bad input here (file:line:col), a fail line there
        path = map_path(os.environ, gpu_map)
        if os.path.lexists(path):
            load_map(path)
    if campaign is not None and images_lock is None:
        scope = campaign_scope(campaign, profile, required_gfx, lock_path)
    else:
        lock_file = images_lock or Path("images.lock")
        scope = Scope(images=load_expected_images(lock_file), images_lock=lock_file,
                      lock_path=lock_path or default_lock(), profile=profile or "rocm",
                      required_gfx=required_gfx)
        if campaign is not None:  # an explicit --images-lock: the campaign sets the rest
            rest = campaign_scope(campaign, profile, required_gfx, lock_path)
            scope = replace(rest, images=scope.images, images_lock=lock_file)
    checks = run_checks(lock_path=scope.lock_path, runs_dir=runs_dir, images=scope.images,
                        profile=scope.profile, required_gfx=scope.required_gfx,
                        fail_free_bytes=scope.fail_free_bytes,
                        warn_free_bytes=max(10 * GIB, scope.fail_free_bytes),
                        gpu_map=gpu_map, strict_map=strict_map, gres_conf=gres_conf,
                        skip_gpu=None if strict_map else scope.skip_gpu)
    if scope.images is None:
        checks.insert(1, Check("images", "fail",
                               f"{scope.images_lock} not found: no image can be verified"))
    return checks


def _print(checks: list[Check], as_json: bool) -> None:
    if as_json:
        click.echo(render_json(checks), nl=False)
    elif sys.stdout.isatty():
        width = shutil.get_terminal_size((120, 24)).columns
        click.echo(render_table(checks, width=width), nl=False)
    else:
        click.echo(render_plain(checks), nl=False)

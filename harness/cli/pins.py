"""`harness images` and `harness model`: pin image Ids and model files (`run` loads neither)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.base.catalogue import ENV_MISSING_IMAGE
from harness.base.errors import ENVIRONMENT, EnvironmentFault, InvalidInput
from harness.base.hashing import sha256_many
from harness.base.tree import NotRegular, kind_of
from harness.cli.jsonout import as_json_errors, emit, json_option
from harness.config.suggest import hint
from harness.measure import images as image_lock
from harness.measure.seal import files_under


@click.group()
def images() -> None:
    """Pin and verify image Ids in images.lock."""


@images.command("pin")
@click.argument("name")
@click.argument("ref")
@click.option("--images-lock", "lock_file", type=click.Path(path_type=Path), default="images.lock",
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

    The same Id again changes nothing; another Id for a pinned NAME is refused (exit 1)
    unless --replace --reason TEXT, which records the change in its `history`. An
    --archive without that Id: exit 1; bad input: exit 2; REF not local: exit 3 (no
    registry is used).
    """
    decision = image_lock.pin(lock_file, name, ref, replace=replace, reason=reason,
                              archive=archive, build=build)
    for line in decision.describe(name):
        click.echo(line)


@images.command("verify")
@click.argument("names", nargs=-1)
@click.option("--images-lock", "lock_file", type=click.Path(path_type=Path), default="images.lock",
              show_default=True)
@json_option("ok, exit_code, and per image its name, pinned Id, local Id and advice")
def images_verify(names: tuple[str, ...], lock_file: Path, as_json: bool) -> None:
    """Check images.lock entries (all, or NAMES) against the local engine.

    Exit 3 if any is absent or has another Id, each saying how to obtain the pinned image
    (never to re-pin); exit 2 for a bad images.lock or a NAME it does not pin."""
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


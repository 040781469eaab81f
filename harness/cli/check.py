"""`harness check`: validate campaigns, controls and image locks, launching nothing.

Its own module so that checking a file loads the configuration code only, not the engine
client or the driver that `harness run` needs (an operator waits for `check`)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from harness.base.errors import INVALID, InvalidInput
from harness.cli.jsonout import as_json_errors, emit, json_option
from harness.config.loader import check as check_all
from harness.readers.report.inert import inert


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option("ok, exit_code, files, faults and warnings (each with file, line, col, "
             "message)")
def check(files: tuple[Path, ...], as_json: bool) -> None:
    """Validate campaigns, controls and image locks without launching anything.

    Prints every fault as FILE:LINE:COL: message; exit 0 when valid, 2 when not. A warning
    names what every run would be refused for until the operator acts (a model with no
    file pinned); it does not change the exit code.
    """
    with as_json_errors(as_json, files=[str(f) for f in files]):
        faults, warnings = check_all(list(files))
    if as_json:
        code = INVALID if faults else 0
        emit({"ok": not faults, "exit_code": code, "files": [str(f) for f in files],
              "faults": [asdict(f) for f in faults], "warnings": [asdict(w) for w in warnings]})
        raise click.exceptions.Exit(code)
    for w in warnings:
        click.echo(inert(str(w), 20_000), err=True)
    if faults:
        raise InvalidInput(f"{len(faults)} fault(s)", faults=[str(f) for f in faults])
    click.echo(f"ok: {len(files)} file(s) valid")

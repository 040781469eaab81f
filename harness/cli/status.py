"""`harness status`: the GPU lock, the harness containers, each campaign's latest night.

Its own module so that a look at the status loads only the readers it needs, not the
night runner and the driver that `harness night` and `harness rerun` need."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.base.catalogue import ENV_NO_ENGINE, ENV_ORPHAN_CONTAINER
from harness.base.errors import EnvironmentFault
from harness.base.terminal import paint_statuses
from harness.cli.params import color_option, default_lock, lock_option, runs_dir_option
from harness.readers.statuslines import gather, render


@click.command("status")
@runs_dir_option("reads", help="where the nights are read (RUNS_DIR/nights/)")
@lock_option()
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
@color_option()
def status(runs_dir: Path, lock_path: Path | None, as_json: bool) -> None:
    """Who holds the GPU lock and since when, which harness containers run, and each
    campaign's latest night.

    A running harness container whose launcher is gone is flagged "GPU in use without the
    lock". Exit 0; 2 when the runs dir does not exist; 3 when the Docker engine does not
    answer, or such a container uses this lock's GPU (everything is still printed)."""
    lock_path = lock_path or default_lock()
    state = gather(runs_dir, lock_path)
    if as_json:
        click.echo(json.dumps(state, indent=2, sort_keys=True, default=str))
    else:
        for line in render(state):
            click.echo(paint_statuses(line))
    if state["engine_error"]:
        raise EnvironmentFault(f"the Docker engine did not answer: {state['engine_error']}",
                               rule=ENV_NO_ENGINE)
    unguarded = [c["id"][:12] for c in state["containers"] if c["orphaned"] and c["on_lock"]]
    if unguarded:
        raise EnvironmentFault(f"GPU in use without the lock {lock_path}: container(s) "
                               f"{', '.join(unguarded)} run with their launcher gone",
                               rule=ENV_ORPHAN_CONTAINER)

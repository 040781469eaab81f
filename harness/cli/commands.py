"""The list of commands the `harness` group offers; each lives in its own module."""

from __future__ import annotations

import click

from harness.cli import core, doctor

ALL: list[click.Command] = [*core.ALL, doctor.doctor]

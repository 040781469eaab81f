"""The list of commands the `harness` group offers; each lives in its own module."""

from __future__ import annotations

import importlib

import click

from harness.cli import core, doctor, report, schedule

ALL: list[click.Command] = [*core.ALL, doctor.doctor, report.report, schedule.schedule]

# Commands still being written by other sessions: registered once their module exists.
for _module, _names in (("harness.cli.night", ("night", "rerun", "status")),
                        ("harness.cli.finalize", ("finalize", "refinalize")),
                        ("harness.cli.bundle", ("bundle",))):
    try:
        _mod = importlib.import_module(_module)
    except ModuleNotFoundError:
        continue
    ALL += [getattr(_mod, n) for n in _names if hasattr(_mod, n)]

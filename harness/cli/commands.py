"""The commands the `harness` group offers: name -> "module:object".

A command's module is imported only when that command runs (`harness.cli.main.LazyGroup`).
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "check": "harness.cli.check:check",
    "run": "harness.cli.core:run",
    "verify": "harness.cli.verify:verify",
    "diff": "harness.cli.diff:diff",
    "show": "harness.cli.show:show",
    "images": "harness.cli.pins:images",
    "model": "harness.cli.pins:model",
    "doctor": "harness.cli.doctor:doctor",
    "night": "harness.cli.night:night",
    "rerun": "harness.cli.night:rerun",
    "status": "harness.cli.status:status",
    "finalize": "harness.cli.finalize:finalize",
    "refinalize": "harness.cli.finalize:refinalize",
    "report": "harness.cli.report:report",
    "schedule": "harness.cli.schedule:schedule",
    "selftest": "harness.cli.selftest:selftest",
    "bundle": "harness.cli.bundle:bundle",
    "approve": "harness.cli.gates:approve",
    "gates": "harness.cli.gates:gates",
    "ls": "harness.cli.ls:ls",
    "init": "harness.cli.init:init",
}

# `harness --help` lists the commands under these headings, in this order: by the job at hand.
SECTIONS: dict[str, tuple[str, ...]] = {
    "Run": ("run", "night", "rerun", "check", "doctor"),
    "Read": ("ls", "show", "diff", "verify", "report", "status"),
    "Share": ("bundle", "gates", "approve"),
    "Set up": ("init", "images", "model", "schedule", "selftest", "finalize", "refinalize"),
}


"""The commands the `harness` group offers: name -> "module:object".

Each command lives in its own module and is imported only when it is used (or listed by
--help), so `harness run` does not pay for loading the bundle or report code.
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "check": "harness.cli.core:check",
    "run": "harness.cli.core:run",
    "verify": "harness.cli.verify:verify",
    "diff": "harness.cli.diff:diff",
    "show": "harness.cli.show:show",
    "images": "harness.cli.core:images",
    "model": "harness.cli.core:model",
    "doctor": "harness.cli.doctor:doctor",
    "night": "harness.cli.night:night",
    "rerun": "harness.cli.night:rerun",
    "status": "harness.cli.night:status",
    "finalize": "harness.cli.finalize:finalize",
    "refinalize": "harness.cli.finalize:refinalize",
    "report": "harness.cli.report:report",
    "schedule": "harness.cli.schedule:schedule",
    "bundle": "harness.cli.bundle:bundle",
    "approve": "harness.cli.approve:approve",
    "gates": "harness.cli.gates:gates",
}

"""Post-steps: programs that judge a run's evidence after its container exits.

Each writes verdict.json into its out_dir and returns 0 to accept or 1 to refuse. They
run in a separate process so a crashing or hanging judge cannot take the harness down."""

from __future__ import annotations

from harness.config.builtins import POSTSTEPS

# Config owns the names; each one's module here is the name without '-' (exit-code: exitcode).
BUILTINS: dict[str, str] = {
    name: f"harness.judge.poststeps.{name.replace('-', '')}" for name in POSTSTEPS
}

# Built-ins run inside the harness process (saving an interpreter start per run): only a step
# that reads nothing the workload wrote, so no workload file can hang, flood or crash the harness.
# An in-process step's `run` takes `out=`, the text stream for what it prints.
IN_PROCESS: frozenset[str] = frozenset({"exit-code"})

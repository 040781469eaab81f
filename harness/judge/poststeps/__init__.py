"""Post-steps: programs that judge a run's evidence after its container exits.

Each built-in post-step is a module here with one interface, in the manner of in-toto's
witness plug-ins:

    def run(run_dir: Path, out_dir: Path, options: dict) -> int

It reads the run folder, writes its verdict (``verdict.json``) and any files of its own into
``out_dir`` (``run_dir/post-steps/NAME/``), and returns 0 to accept or 1 to refuse. The
pipeline runs it in a separate process (``python -m harness.judge.poststeps NAME RUN_DIR OUT_DIR``)
so a crashing or hanging judge cannot take the harness down, and records its exit code and
output; the ones in IN_PROCESS run inside the harness instead (below).
"""

from __future__ import annotations

from harness.config.builtins import POSTSTEPS

# Config owns the names; each one's module here is the name without '-' (exit-code: exitcode).
BUILTINS: dict[str, str] = {
    name: f"harness.judge.poststeps.{name.replace('-', '')}" for name in POSTSTEPS
}

# Built-ins the pipeline runs inside the harness process, saving an interpreter start (about
# 25 ms plus imports) per run. Only a step that reads nothing but what the harness itself
# wrote qualifies: exit-code reads outcome.json, bounded, as a regular file, not through a
# symlink, so no workload-written file can make it hang, flood or crash the harness. gate0,
# image-gate and reference parse files the workload wrote (observations, logs, metrics):
# they stay in a child process with its timeout. An in-process step's `run` takes `out=`,
# the text stream for what it prints.
IN_PROCESS: frozenset[str] = frozenset({"exit-code"})

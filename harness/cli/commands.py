"""The commands the `harness` group offers: name -> "module:object".

Each command lives in its own module and is imported only when it is used, so `harness run`
does not pay for loading the bundle or report code, and `harness --help` imports none of
them: it lists each command with its line from SUMMARIES, which
tests/unit/test_cli_lazy.py holds equal to what the command's own help gives.
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "check": "harness.cli.check:check",
    "run": "harness.cli.core:run",
    "verify": "harness.cli.verify:verify",
    "diff": "harness.cli.diff:diff",
    "show": "harness.cli.show:show",
    "images": "harness.cli.core:images",
    "model": "harness.cli.core:model",
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
    "approve": "harness.cli.approve:approve",
    "gates": "harness.cli.gates:gates",
    "ls": "harness.cli.ls:ls",
    "init": "harness.cli.init:init",
}


# name -> the first sentence of the command's help (click's short help cuts at it), shown by
# `harness --help` without importing the command. A command missing here is imported.
SUMMARIES: dict[str, str] = {
    "approve": "Approve the campaign's current source seal for runs.",
    "bundle": ("Export run folders as a verifiable evidence bundle, verify one offline, merge "
               "several into one, or collect those Slurm hosts left in a drop."),
    "check": "Validate campaigns, controls and image locks without launching anything.",
    "diff": (
        "What differs between two runs: first the outcome (status, rules, each Gate-0 field "
        "either run found differing), then what went in (the source seal and its files, the "
        "control's and campaign's YAML, git state, the approval each ran under, image Id, model "
        "pins, engine args, the environment and the docker argv), then metrics."
    ),
    "doctor": ("Check the Docker engine, locked images, GPU devices, map and tools, the lock "
               "and disk."),
    "finalize": ("Gate 0: refuse unless the start-up and generation observations name the same "
                 "engine."),
    "gates": "Run the campaign's gates in order and write a sealed gate record.",
    "images": "Pin and verify image Ids in images.lock.",
    "init": "Start a campaign repository in DIR (default: the current folder).",
    "ls": "List the runs in the runs dir, newest first, as `docker ps -a` lists containers.",
    "model": "Pin the files of a model folder.",
    "night": "Run a whole campaign unattended, journaled so it can resume after a crash.",
    "refinalize": "Re-judge a sealed run into a new addendum; the run's recorded status stands.",
    "report": (
        "Report a night: per control its status, verdict and reasons, lock wait and hold, "
        "duration, exit code and the vLLM metrics it has (marked where outside the control's "
        "reference), with links to each run's folder and logs and, in HTML, plots across the "
        "campaign's nights."
    ),
    "rerun": "Run RUN_DIR's control again as a new attempt, linked both ways to the original.",
    "run": "Run a campaign's controls, one at a time under the GPU lock, and seal each run.",
    "selftest": ("Check this harness's Gate 0 against the cases shipped with it, or run the "
                 "image gate."),
    "schedule": (
        "Print a systemd user service + timer (Persistent=true) that runs `harness night "
        "CAMPAIGN`, and a cron line as an alternative."
    ),
    "show": (
        "Print a readable summary of a sealed run folder (or of a gate record: `harness "
        "gates`)."
    ),
    "status": (
        "Who holds the GPU lock and since when, which harness containers run, and each "
        "campaign's latest night."
    ),
    "verify": "Re-hash a sealed run folder (or gate record).",
}

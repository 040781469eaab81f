"""The simplest judge: the container must have exited 0, not OOM-killed, not timed out.

`judge_exit` is the one judge of a container's exit: the harness's own status
(`verdict.decide`) asks it too, so the post-step and run.json can never disagree about the
same exit. It imports nothing heavy: this module starts in its own process for every run.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.atomic import write_json
from harness.catalogue import RUN_EXIT, RUN_INTERRUPTED, RUN_OOM, RUN_TIMEOUT
from harness.runfolder import layout


def judge_exit(outcome: dict) -> tuple[str, list[tuple[str, str]]]:
    """(the status an exit implies, [(rule, detail)]). Pure; precedence as the status's."""
    if outcome.get("interrupted"):
        return "interrupted", [(RUN_INTERRUPTED, "the harness was stopped during the run")]
    if outcome.get("timed_out"):
        return "timed-out", [(RUN_TIMEOUT, "the container ran past its timeout")]
    if outcome.get("oom_killed"):
        return "failed", [(RUN_OOM, "the container was killed for memory")]
    code = outcome.get("exit_code")
    if code is None:
        return "failed", [(RUN_EXIT, "no exit code was recorded")]
    if code != 0:
        return "failed", [(RUN_EXIT, f"the container exited {code}")]
    return "accepted", []


def judge(outcome: dict) -> tuple[str, list[str]]:
    """Pure verdict from the recorded container outcome. Returns (verdict, reasons)."""
    _, found = judge_exit(outcome)
    reasons = [f"{rule}: {detail}" for rule, detail in found]
    return ("refused" if reasons else "accepted"), reasons


def run(run_dir: Path, out_dir: Path, options: dict) -> int:
    path = run_dir / layout.OUTCOME
    try:
        outcome = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        outcome = {}
        print(f"exit-code: cannot read {path}: {e}")
    if not isinstance(outcome, dict):  # a hostile or broken outcome is no exit code at all
        outcome = {}
    verdict, reasons = judge(outcome)
    write_json(out_dir / layout.VERDICT, {
        "schema": "harness.verdict/v1", "verdict": verdict, "reasons": reasons,
    })
    for r in reasons:
        print(r)
    print(f"exit-code: {verdict}")
    return 0 if verdict == "accepted" else 1

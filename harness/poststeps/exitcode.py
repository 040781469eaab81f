"""The simplest judge: the container must have exited 0, not OOM-killed, not timed out.

It asks `harness.verdict.judge_exit`, the judge the harness itself uses for the run's status,
so the post-step and run.json can never disagree about the same exit.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.atomic import write_json
from harness.runfolder import layout
from harness.verdict import judge_exit


def judge(outcome: dict) -> tuple[str, list[str]]:
    """Pure verdict from the recorded container outcome. Returns (verdict, reasons)."""
    _, found = judge_exit(outcome)
    reasons = [str(r) for r in found]
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

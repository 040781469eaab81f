"""The simplest judge: the container must have exited 0, not OOM-killed, not timed out."""

from __future__ import annotations

import json
from pathlib import Path

from harness.atomic import write_json


def judge(outcome: dict) -> tuple[str, list[str]]:
    """Pure verdict from the recorded container outcome. Returns (verdict, reasons)."""
    reasons = []
    if outcome.get("timed_out"):
        reasons.append("EXIT-TIMEOUT: the container ran past its timeout")
    if outcome.get("oom_killed"):
        reasons.append("EXIT-OOM: the container was killed for memory")
    code = outcome.get("exit_code")
    if code is None:
        reasons.append("EXIT-UNKNOWN: no exit code was recorded")
    elif code != 0:
        reasons.append(f"EXIT-NONZERO: the container exited {code}")
    return ("refused" if reasons else "accepted"), reasons


def run(run_dir: Path, out_dir: Path, options: dict) -> int:
    path = run_dir / "outcome.json"
    try:
        outcome = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        outcome = {}
        print(f"exit-code: cannot read {path}: {e}")
    verdict, reasons = judge(outcome)
    write_json(out_dir / "verdict.json", {
        "schema": "harness.verdict/v1", "verdict": verdict, "reasons": reasons,
    })
    for r in reasons:
        print(r)
    print(f"exit-code: {verdict}")
    return 0 if verdict == "accepted" else 1

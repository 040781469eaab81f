"""The simplest judge: the container must have exited 0, not OOM-killed, not timed out.

It reads only `outcome.json`, which the harness wrote, so it may run in the harness's
own process, saving an interpreter per run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from harness.base.atomic import write_json
from harness.base.catalogue import RUN_EXIT, RUN_INTERRUPTED, RUN_OOM, RUN_TIMEOUT
from harness.base.readfile import InputError, read_bounded
from harness.base.reason import Reason
from harness.base.states import Status, Verdict
from harness.instrument.harness_observer.encode import loads as strict_loads
from harness.judge.verdictfile import document, verdict_of
from harness.measure.runfolder import layout

OUTCOME_LIMIT = 1 << 20  # the harness writes a few hundred bytes


def judge_exit(outcome: dict) -> tuple[Status, list[Reason]]:
    """(the status an exit implies, its reasons). Pure; precedence as the status's."""
    if outcome.get("interrupted"):
        sig = outcome.get("signal")  # named only when it is one of the stop signals
        by = f" by {sig}" if sig in ("SIGTERM", "SIGHUP", "SIGINT") else ""
        return Status.INTERRUPTED, [Reason(RUN_INTERRUPTED,
                                           f"the harness was stopped{by} during the run")]
    if outcome.get("timed_out"):
        return Status.TIMED_OUT, [Reason(RUN_TIMEOUT, "the container ran past its timeout")]
    if outcome.get("oom_killed"):
        return Status.FAILED, [Reason(RUN_OOM, "the container was killed for memory")]
    code = outcome.get("exit_code")
    if code is None:
        return Status.FAILED, [Reason(RUN_EXIT, "no exit code was recorded")]
    if code != 0:
        return Status.FAILED, [Reason(RUN_EXIT, f"the container exited {code}")]
    return Status.ACCEPTED, []


def judge(outcome: dict) -> tuple[Verdict, list[Reason]]:
    """Pure verdict from the recorded container outcome. Returns (verdict, reasons)."""
    _, reasons = judge_exit(outcome)
    return verdict_of(reasons), reasons


def read_outcome(run_dir: Path) -> tuple[dict, str | None]:
    """(the recorded outcome, why it could not be read). Bounded, a regular file, never through
    a symlink, strict JSON, so nothing at that name can hang or flood the harness process.
    Unreadable is an empty outcome, which `judge` refuses."""
    path = run_dir / layout.OUTCOME
    try:
        doc = strict_loads(read_bounded(path, OUTCOME_LIMIT, "outcome").decode("utf-8"))
    except InputError as e:
        return {}, e.message
    except (ValueError, RecursionError) as e:  # not UTF-8, not strict JSON, too deep
        return {}, f"{path}: {e}"
    return (doc, None) if isinstance(doc, dict) else ({}, f"{path}: not a JSON object")


def run(run_dir: Path, out_dir: Path, options: dict, out: TextIO | None = None) -> int:
    """Write the verdict; the lines a person reads go to `out` (stdout when run alone)."""
    out = out or sys.stdout
    outcome, problem = read_outcome(run_dir)
    if problem:
        print(f"exit-code: cannot read the outcome: {problem}", file=out)
    verdict, reasons = judge(outcome)
    write_json(out_dir / layout.VERDICT, document(reasons))
    for r in reasons:
        print(r.text(), file=out)
    print(f"exit-code: {verdict}", file=out)
    return 0 if verdict == Verdict.ACCEPTED else 1

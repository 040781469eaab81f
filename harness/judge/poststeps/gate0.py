"""Gate-0 post-step: the run's start-up and generation observations must agree.

Missing or unreadable observations refuse the run; so does a bad contract option."""

from __future__ import annotations

from pathlib import Path

from harness.base.atomic import write_json
from harness.base.catalogue import GATE0_OPTIONS
from harness.base.reason import Reason
from harness.config.fieldlist import parse_choice, resolve
from harness.judge.finalize.contract import ContractError
from harness.judge.finalize.explain import render
from harness.judge.finalize.observed import judge_run, refusal
from harness.judge.finalize.rules import exit_code
from harness.measure.runfolder import layout


def run(run_dir: Path, out_dir: Path, options: dict) -> int:
    contract = resolve(None)
    verdict = None
    if not isinstance(options, dict):
        verdict = refusal([Reason(GATE0_OPTIONS, "the options must be a JSON object")], None)
    elif options.get("contract") is not None:
        try:
            contract = resolve(parse_choice(options["contract"]))
        except ContractError as e:
            verdict = refusal([Reason(GATE0_OPTIONS, f"contract: {f}") for f in e.faults], None)
    if verdict is None:
        verdict = judge_run(Path(run_dir), contract)
    write_json(Path(out_dir) / layout.VERDICT, verdict)
    print(render(verdict), end="")
    return exit_code(verdict)

"""The `reference` post-step: the run's figures against the control's reference values.

Every figure is judged and kept in verdict.json, so the report marks a value outside even
where the control does not refuse on it; only a `refuse: true` figure outside or absent
refuses the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from harness.base.atomic import write_json
from harness.base.catalogue import REFERENCE_MISSING, REFERENCE_OPTIONS, REFERENCE_OUTSIDE
from harness.base.reason import Reason
from harness.base.states import Verdict
from harness.config.references import FIGURE_UNITS, Bound, References, finding, range_text
from harness.judge.poststeps.exitcode import read_outcome
from harness.judge.verdictfile import document, verdict_of
from harness.measure.metrics import UNITS, write_metrics
from harness.measure.runfolder import layout


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def figures(run_dir: Path, measured: dict) -> dict[str, float | int | None]:
    """Every figure a reference may name, from the open run folder; absent ones are None."""
    outcome, _ = read_outcome(run_dir)  # {}: nothing launched, or a damaged one
    logs = run_dir / layout.LOGS
    doc = write_metrics([logs / layout.STDOUT_LOG, logs / layout.STDERR_LOG], base=run_dir)
    found = {"duration_s": _number(outcome.get("duration_s")),
             "exit_code": _number(outcome.get("exit_code")),
             "lock_wait_s": _number(measured.get("lock_wait_s")),
             "lock_hold_s": _number(measured.get("lock_hold_s"))}
    return {**found, **{k: _number(v) for k, v in doc["metrics"].items()}}


def judge(refs: dict[str, Bound], values: dict) -> tuple[Verdict, list[Reason], list[dict]]:
    """(verdict, reasons, findings). Pure."""
    findings = [finding(name, bound, values.get(name)) for name, bound in sorted(refs.items())]
    reasons: list[Reason] = []
    for f in findings:
        if not f["refuse"]:
            continue
        expected = range_text(f["lower"], f["upper"])
        unit = FIGURE_UNITS.get(f["metric"]) or UNITS.get(f["metric"], "")
        unit = f" {unit}" if unit else ""
        if f["outside"] is None:
            reasons.append(Reason(REFERENCE_MISSING, f"{f['metric']} has no value in this "
                                                     f"run (expected {expected}{unit})"))
        elif f["outside"]:
            reasons.append(Reason(REFERENCE_OUTSIDE, f"{f['metric']} = {f['value']:.6g}{unit}, "
                                                     f"expected {expected}"))
    return verdict_of(reasons), reasons, findings


def run(run_dir: Path, out_dir: Path, options: dict) -> int:
    try:
        if not isinstance(options, dict):
            raise ValueError("the options must be a JSON object")
        refs = _parse(options.get("reference"))
        measured = options.get("measured") or {}
        if not isinstance(measured, dict):
            raise ValueError("measured must be an object")
    except ValueError as e:
        reasons, findings = [Reason(REFERENCE_OPTIONS, str(e))], []
    else:
        _, reasons, findings = judge(refs, figures(Path(run_dir), measured))
    verdict = verdict_of(reasons)
    write_json(Path(out_dir) / layout.VERDICT, document(reasons, findings=findings))
    for f in findings:
        state = {None: "no value", True: "OUTSIDE", False: "inside"}[f["outside"]]
        print(f"{f['metric']}: {f['value']} {range_text(f['lower'], f['upper'])} {state}")
    print(f"reference: {verdict}")
    return 0 if verdict == Verdict.ACCEPTED else 1


def _parse(raw: Any) -> dict[str, Bound]:
    try:
        return TypeAdapter(References).validate_python(raw)
    except ValidationError as e:
        raise ValueError("; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}"
                                   for x in e.errors()[:5])) from None

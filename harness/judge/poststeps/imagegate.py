"""Image-gate post-step: the instrument, run inside the pinned image, found what it must.

It reuses Gate 0's `judge_run` and accepts only exactly the expected differences, each
attributed by the trace to the named hooked call; anything else refuses, never passing
on "some refusal"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.base.atomic import write_json
from harness.base.catalogue import (
    GATE0_FIELD_DIFFERS,
    IMAGE_GATE_OPTIONS,
    IMAGE_GATE_TRACE,
    IMAGE_GATE_VERDICT,
)
from harness.base.readfile import InputError
from harness.base.reason import Reason, rules
from harness.base.states import Verdict
from harness.config.fieldlist import resolve
from harness.config.imagegatespec import Expectation, parse_expectation
from harness.judge.finalize.attribute import attribute, describe, read_trace
from harness.judge.finalize.explain import render
from harness.judge.finalize.observed import judge_run
from harness.judge.verdictfile import document
from harness.measure.runfolder import layout


def judge_verdict(expect: Expectation, gate0: dict[str, Any]) -> list[Reason]:
    """Why Gate 0's verdict is not the expected one (empty: it is). Pure."""
    found = {d["field"]: d["kind"] for d in gate0.get("differences", [])}
    reasons = []
    if found != expect.differences:
        reasons.append(Reason(IMAGE_GATE_VERDICT, f"Gate 0 found {found or 'no difference'}, "
                              f"the gate expects {expect.differences or 'no difference'}"))
    want = ((Verdict.REFUSED, [GATE0_FIELD_DIFFERS]) if expect.differences
            else (Verdict.ACCEPTED, []))
    got = (gate0.get("verdict"), list(gate0.get("refused_by", [])))
    if got != want:
        reasons.append(Reason(IMAGE_GATE_VERDICT, f"Gate 0 was {got[0]} by "
                              f"{got[1] or 'no rule'}, the gate expects {want[0]} by "
                              f"{want[1] or 'no rule'}"))
    return reasons


def judge_trace(expect: Expectation, results: list[dict[str, Any]],
                bad: int) -> list[Reason]:
    """Why the trace does not name the expected calls (empty: it does). Pure."""
    reasons = []
    if bad:
        reasons.append(Reason(IMAGE_GATE_TRACE, f"{bad} trace line(s) are not records"))
    for result in results:
        want = expect.changed_in[result["field"]]
        if result["errors"]:
            reasons.append(Reason(IMAGE_GATE_TRACE, f"the trace recorded {result['errors']} "
                                  "error(s) of its own; it may have missed a change"))
        if not result["found"] or not result["changes"]:
            reasons.append(Reason(IMAGE_GATE_TRACE, describe(result)))
            continue
        stray = [c for c in result["changes"] if want not in c["within"]]
        if stray:
            where = " > ".join(stray[0]["within"]) or "no hooked call"
            reasons.append(Reason(IMAGE_GATE_TRACE, f"{result['field']} changed in {where}, "
                                  f"not inside {want}"))
    return reasons


def evaluate(run_dir: Path, expect: Expectation) -> dict[str, Any]:
    """The image-gate verdict document for a run folder."""
    gate0 = judge_run(Path(run_dir), resolve(expect.contract))  # as the gate0 post-step
    reasons = judge_verdict(expect, gate0)
    results: list[dict[str, Any]] = []
    if expect.changed_in:
        try:
            records, bad = read_trace(Path(run_dir) / layout.OBSERVATIONS / layout.TRANSITIONS)
        except InputError as e:
            records, bad = [], 0
            reasons.append(Reason(IMAGE_GATE_TRACE, e.message))
        start, end = expect.checkpoints
        results = [attribute(records, field, start, end) for field in sorted(expect.changed_in)]
        reasons += judge_trace(expect, results, bad)
    return document(reasons, refused_by=rules(reasons),
                    expected={"differences": expect.differences,
                              "changed_in": expect.changed_in,
                              "checkpoints": list(expect.checkpoints)},
                    gate0=gate0, attribution=results)


def run(run_dir: Path, out_dir: Path, options: dict) -> int:
    try:
        verdict = evaluate(run_dir, parse_expectation(options))
    except ValueError as e:
        verdict = document([Reason(IMAGE_GATE_OPTIONS, str(e))],
                           refused_by=[IMAGE_GATE_OPTIONS])
    write_json(Path(out_dir) / layout.VERDICT, verdict)
    if "gate0" in verdict:
        print(render(verdict["gate0"]), end="")
    for result in verdict.get("attribution", []):
        print(describe(result))
    for r in verdict["reasons"]:
        print(Reason(r["rule"], r["detail"]).text())
    print(f"image-gate: {verdict['verdict']}")
    return 0 if verdict["verdict"] == Verdict.ACCEPTED else 1

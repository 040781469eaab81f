"""What a run of the gates comes to, as pure functions of what each gate did: the gates
selected, each one's entry in gates.json, the record's own refusals (a source seal that
changed while they ran), the checkout's state joined over every check, and the exit code.
harness.probe.gaterun runs the commands and seals the record.
"""

from __future__ import annotations

from typing import Any

from harness.base.catalogue import GATES_SEAL_CHANGED
from harness.base.errors import ENVIRONMENT, OK, REFUSED, InvalidInput
from harness.config.gatelist import Gate
from harness.judge.gaterecord.gatesjson import verdict
from harness.judge.gaterecord.onegate import GateRun, GateVerdict
from harness.measure.provenance import MAX_PROBLEMS, CleanCheck
from harness.measure.seal import SourceSeal, seal_changes


def select(gates: list[Gate], only: tuple[str, ...]) -> list[Gate]:
    """Pure: the gates to run, in campaign order; InvalidInput naming an unknown --only."""
    names = {g.name for g in gates}
    unknown = [n for n in only if n not in names]
    if unknown:
        raise InvalidInput(f"--only {', '.join(unknown)}: no such gate (the campaign lists "
                           f"{', '.join(sorted(names)) or 'none'})")
    return [g for g in gates if not only or g.name in only]


def gate_entry(gate: Gate, argv: list[str], out: GateRun,
               verdict: GateVerdict) -> dict[str, Any]:
    """Pure: one gate's entry in gates.json."""
    return {"name": gate.name, "argv": argv, "exit_code": out.exit_code,
            "passed": verdict.passed, "duration_s": out.duration_s, "counts": verdict.counts,
            "kill_score": verdict.kill_score, "min_kill_score": gate.expect.min_kill_score,
            "why": verdict.why}


def exit_code(entries: list[dict[str, Any]], runs: list[GateRun],
              refusals: list[dict[str, str]] = ()) -> int:
    """Pure: 3 when a gate could not start or was interrupted, else 1 when one failed or
    the record holds a refusal, else 0."""
    if any(o.start_error is not None or o.interrupted for o in runs):
        return ENVIRONMENT
    return OK if verdict(entries, list(refusals)) else REFUSED


def refusals_of(before: SourceSeal, after: list[tuple[str, SourceSeal]]) -> list[dict[str, str]]:
    """Pure: what `harness gates` refuses of its own run: a source seal that changed while
    the gates ran, as taken after each gate (`after`: gate name, seal), so a change made
    and reverted between two gates is seen too; the first change is named, with its files."""
    for name, seal in after:
        if seal.digest != before.digest:
            changed = seal_changes(before.files, seal.files)
            return [{"rule": GATES_SEAL_CHANGED,
                     "detail": f"the source seal changed while the gates ran (from "
                               f"{before.digest} to {seal.digest} after gate {name}: "
                               f"{', '.join(changed[:10])}); they did not test the sealed "
                               "bytes: run the gates again"}]
    return []


def joined(checks: list[CleanCheck]) -> dict[str, Any]:
    """Pure: the record's `git`: clean only when the checkout was clean at one commit
    before the first gate and after each one."""
    first = checks[0]
    moved = sorted({f"HEAD moved from {first.commit} to {c.commit} while the gates ran"
                    for c in checks if c.commit != first.commit})
    problems = list(dict.fromkeys([*moved, *(p for c in checks for p in c.problems)]))
    return {"commit": first.commit,
            "clean": all(c.clean for c in checks) and not moved,
            "problems": problems[:MAX_PROBLEMS],
            "problems_total": max(c.problems_total for c in checks) + len(moved)}

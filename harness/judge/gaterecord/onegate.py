"""Judging one gate: pure functions of what its command did and what it wrote.

Everything a gate wrote is hostile: JUnit XML is parsed by defusedxml with no DTD (no
entity expansion), bounded, and the kill score is computed from K and T, never taken
from the printed percentage."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

from harness.config.gatelist import Gate

MAX_JUNIT = 16 * 1024 * 1024
KILL_LINE = re.compile(r"^mutation: killed (\d{1,9})/(\d{1,9}) = [0-9.]+%", re.M)


@dataclass(frozen=True)
class GateRun:
    """One gate's command as the shell saw it: the exit code (None when it never started
    or was killed), the stdout it kept, the JUnit bytes (or why they could not be read)."""

    exit_code: int | None
    duration_s: float
    timed_out: bool = False
    interrupted: bool = False
    start_error: str | None = None
    stdout: str = ""
    junit: bytes | None = None
    junit_problem: str | None = None
    lingering: bool = False  # a process it started still held its stdout/stderr after it


@dataclass(frozen=True)
class GateVerdict:
    """Whether one gate passed, with the figures it was judged on and exactly why not."""

    passed: bool
    counts: dict[str, int] | None
    kill_score: float | None
    why: str | None


def _local(tag: Any) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _declared(suite: Any, key: str) -> int:
    value = suite.get(key, "0")
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 10 else 0


def junit_counts(data: bytes) -> dict[str, int] | str:
    """Pure: {"tests", "failures", "errors", "skipped"} of a JUnit XML document, or why it cannot be
    read. Tests are counted as <testcase> elements, so a forged `tests="1000"` counts for
    nothing."""
    if len(data) > MAX_JUNIT:
        return f"{len(data)} bytes, over the {MAX_JUNIT} byte limit"
    try:
        root = fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as e:
        return f"refused XML ({type(e).__name__}: a DTD or entity is never read)"
    except (ParseError, ValueError) as e:
        return f"not well-formed XML ({str(e)[:200]})"
    if _local(root.tag) not in ("testsuites", "testsuite"):
        return f"the root element is <{_local(root.tag)[:60]}>, not <testsuites> or <testsuite>"
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    declared = {"failures": 0, "errors": 0}
    for el in root.iter():
        tag = _local(el.tag)
        if tag == "testcase":
            kinds = {_local(child.tag) for child in el}
            counts["tests"] += 1
            counts["failures"] += "failure" in kinds
            counts["errors"] += "error" in kinds
            counts["skipped"] += "skipped" in kinds and not kinds & {"failure", "error"}
        elif tag == "testsuite" and not any(_local(c.tag) == "testsuite" for c in el):
            for key in declared:
                declared[key] += _declared(el, key)
    for key, value in declared.items():
        counts[key] = max(counts[key], value)
    return counts


def kill_score(stdout: str) -> float | str:
    """Pure: 100*K/T from the last `mutation: killed K/T = S%` line, or why there is none."""
    found = KILL_LINE.findall(stdout)
    if not found:
        return "no `mutation: killed K/T = S%` line in its output"
    killed, total = (int(n) for n in found[-1])
    if total == 0 or killed > total:
        return f"the kill line says {killed}/{total}: no mutants were judged"
    return round(100.0 * killed / total, 2)


def _junit_why(gate: Gate, out: GateRun) -> tuple[dict[str, int] | None, str | None]:
    path = gate.expect.junit
    if out.junit is None:
        return None, f"JUnit {path}: {out.junit_problem or 'not written'}"
    counts = junit_counts(out.junit)
    if isinstance(counts, str):
        return None, f"JUnit {path}: {counts}"
    bad = counts["failures"] + counts["errors"]
    ran = counts["tests"] - counts["skipped"]
    if bad:
        return counts, (f"JUnit {path}: {counts['failures']} failure(s) and "
                        f"{counts['errors']} error(s)")
    if ran < gate.expect.least_tests:
        return counts, (f"JUnit {path}: {ran} test(s) ran, fewer than the "
                        f"{gate.expect.least_tests} required")
    return counts, None


GRACE_NOTE = "past the grace after the gate ended"


def judge(gate: Gate, out: GateRun) -> GateVerdict:
    """Pure: whether `gate` passed, with its counts, kill score and exactly why not."""
    whys: list[str] = []
    if out.start_error is not None:
        return GateVerdict(False, None, None, f"could not start: {out.start_error}")
    if out.interrupted:
        return GateVerdict(False, None, None,
                           "interrupted by the operator (the gate was killed)")
    if out.timed_out:
        whys.append(f"ran past its {gate.timeout:g} s timeout and was killed")
    elif out.exit_code != gate.expect.exit_code:
        whys.append(f"exited {out.exit_code}, expected {gate.expect.exit_code}")
    if out.lingering:
        whys.append(f"a process it started outlived it (held its output {GRACE_NOTE}); its "
                    "logs stop there")
    counts = score = None
    if gate.expect.junit is not None:
        counts, why = _junit_why(gate, out)
        whys += [why] if why else []
    if gate.expect.min_kill_score is not None:
        found = kill_score(out.stdout)
        if isinstance(found, str):
            whys.append(f"kill score: {found}")
        else:
            score = found
            if score < gate.expect.min_kill_score:
                whys.append(f"kill score {score:g}% is below the minimum "
                            f"{gate.expect.min_kill_score:g}%")
    return GateVerdict(not whys, counts, score, "; ".join(whys) or None)

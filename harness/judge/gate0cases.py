"""Gate 0's own cases, shipped in the wheel: the finalizer judged against known outcomes.

An installed harness carries no test suite, so these cases vouch that its Gate 0 still
judges as it must, through the very `judge_run` the post-step calls: no second Gate 0.
The cases are data anyone with write access could change, so they are read as hostile
(bounded, no symlink, strict shape); an unreadable case fails saying why, never a pass."""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints

from harness.base.catalogue import RULES
from harness.base.names import is_name
from harness.base.readfile import InputError, TooLarge, read_fd
from harness.base.states import Verdict
from harness.base.tree import TooMany, open_beneath, printable, walk
from harness.config.fieldlist import KINDS, parse_choice, resolve
from harness.config.imagegatespec import Expectation, parse_expectation
from harness.config.schema import OneLine, Strict
from harness.instrument.harness_observer.interface import (
    ENGINE_CORE,
    FRONTEND,
    TRANSITIONS,
    WORKER,
)
from harness.judge.finalize.attribute import attribute, describe, read_trace
from harness.judge.finalize.contract import ContractError
from harness.judge.finalize.documents import MAX_BYTES as MAX_DOCUMENT
from harness.judge.finalize.observed import judge_run
from harness.judge.finalize.processes import named
from harness.judge.poststeps.imagegate import judge_trace
from harness.measure.runfolder.layout import OBSERVATIONS, PREFLIGHT

CASES = Path(__file__).resolve().parents[1] / "data" / "selftest" / "gate0"
SCHEMA = "harness.selftest.gate0-case/v1"
SPEC = "case.json"
MAX_SPEC = 64 * 1024
MAX_CASE = 64 * 1024 * 1024  # every file of one case together
MAX_ENTRIES = 4096  # files and folders under the cases folder


def _rule(value: str) -> str:
    if value not in RULES:
        raise ValueError(f"{value[:100]!r} is not a rule of the catalogue")
    return value


def _known_kind(value: str) -> str:
    if value not in KINDS:
        raise ValueError(f"{value[:60]!r} is not one of {', '.join(KINDS)}")
    return value


Process = Annotated[str, StringConstraints(pattern=rf"^(?:{ENGINE_CORE}|{FRONTEND}|{WORKER}-"
                                                   r"(?:0|[1-9][0-9]{0,3}))$")]
Dotted = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*"
                                                  r"(\.[A-Za-z_][A-Za-z0-9_]*)+$",
                                          max_length=200)]
Sha = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]


class Difference(Strict):
    """One difference Gate 0 must find: in which process, which field, of which kind."""

    process: Process
    field: Dotted
    kind: Annotated[str, AfterValidator(_known_kind)]


class Expected(Strict):
    """What Gate 0 must reach: its verdict and rules exactly, exactly these differences,
    each `changed_in` field changed inside that hooked call (the trace), and each of
    `mentions` in one of its reasons."""

    verdict: Verdict
    refused_by: list[Annotated[str, AfterValidator(_rule)]] = Field(max_length=50)
    differences: list[Difference] = Field(max_length=1000)
    changed_in: dict[Dotted, Annotated[str, StringConstraints(max_length=220)]] = Field(
        default_factory=dict, max_length=50)
    mentions: list[OneLine] = Field(default_factory=list, max_length=50)


class Recorded(Strict):
    """The seal and image Id the harness recorded for the run the case stands for."""

    seal: Sha
    image: Sha


class Spec(Strict):
    """case.json."""

    schema_: str = Field(alias="schema", pattern=rf"^{re.escape(SCHEMA)}$")
    proves: OneLine
    made: OneLine
    recorded: Recorded
    contract: list[Dotted] | str | None
    expect: Expected


@dataclass(frozen=True)
class Case:
    """A case read whole: its spec, the trace expectation its `changed_in` makes, and the
    bytes of each observation file (name -> bytes)."""

    name: str
    spec: Spec
    trace: Expectation | None
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Broken:
    """A folder (or stray entry) under the cases folder that is no readable case."""

    name: str
    why: str


@dataclass(frozen=True)
class CaseResult:
    """One case judged: passed or why not, with one line of what Gate 0 found."""

    name: str
    proves: str
    passed: bool
    got: str
    why: str | None = None
    duration_s: float = 0.0


class CasesMissing(Exception):
    """The cases folder is absent or not a real folder: this installation lacks them."""


# ---- reading the cases -------------------------------------------------------------------------

def load_cases(root: Path | None = None) -> list[Case | Broken]:
    """Every case folder under `root`, in name order; a stray entry or unreadable case is a
    Broken one. CasesMissing when `root` is not a real folder."""
    root = CASES if root is None else root
    try:
        entries = walk(root, MAX_ENTRIES)
    except TooMany:
        return [Broken(printable(str(root)), f"more than {MAX_ENTRIES} entries")]
    except OSError as e:  # absent, not a folder (NotRegular), unreadable
        raise CasesMissing(f"{root}: {e.strerror or e}") from None
    tops = [e for e in entries if "/" not in e.rel]
    out: list[Case | Broken] = []
    for top in tops:
        inside = [e for e in entries if e.rel.startswith(top.rel + "/")]
        if not top.is_dir:
            out.append(Broken(printable(top.rel), f"a {top.kind}, not a case folder"))
        elif top.name_problem or not is_name(top.rel):
            out.append(Broken(printable(top.rel), "a folder named outside the name alphabet "
                              "(letters, digits, '.', '_', '-')"))
        else:
            out.append(_read_case(root, top.rel, inside))
    return out


def _layout_problem(name: str, entries: list[Any]) -> str | None:
    """Why a case folder's entries are not case.json and observations/<observed name>."""
    for e in entries:
        rel = e.rel[len(name) + 1:]
        if rel == OBSERVATIONS and e.is_dir:
            continue
        head, _, tail = rel.partition("/")
        if rel == SPEC and e.is_file:
            continue
        if head == OBSERVATIONS and e.is_file and (tail == TRANSITIONS or named(tail)):
            continue  # the trace, or a process's observation (`processes.named`)
        return f"{printable(rel)}: a {e.kind} that no case holds (only {SPEC} and " \
               f"{OBSERVATIONS}/ with the files an instrument writes)"
    return None


def _read(root: Path, rel: str, limit: int) -> bytes:
    fd = open_beneath(root, rel)
    try:
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def _read_case(root: Path, name: str, entries: list[Any]) -> Case | Broken:
    if (why := _layout_problem(name, entries)) is not None:
        return Broken(name, why)
    try:
        spec = Spec.model_validate(json.loads(_read(root, f"{name}/{SPEC}", MAX_SPEC)))
        trace = _trace_expectation(spec)
        files, total = {}, 0
        for e in entries:
            rel = e.rel[len(name) + 1:]
            if e.is_file and rel != SPEC:
                files[rel.partition("/")[2]] = data = _read(root, e.rel, MAX_DOCUMENT)
                total += len(data)
                if total > MAX_CASE:
                    return Broken(name, f"its files are over {MAX_CASE} bytes together")
    except (OSError, TooLarge) as e:
        return Broken(name, f"unreadable: {printable(str(getattr(e, 'strerror', None) or e))}")
    except (ValueError, RecursionError) as e:  # JSON, the spec's shape, the contract
        return Broken(name, f"{SPEC} is not a case: {printable(str(e))[:1000]}")
    return Case(name, spec, trace, files)


def _trace_expectation(spec: Spec) -> Expectation | None:
    """The image gate's expectation of the trace, when the case names calls."""
    if spec.contract is not None:  # a contract the gate0 post-step would refuse is no case
        parse_choice(spec.contract)
    if not spec.expect.changed_in:
        return None
    kinds = {d.field: d.kind for d in spec.expect.differences}
    return parse_expectation({"differences": kinds, "changed_in": spec.expect.changed_in})


# ---- judging one case ------------------------------------------------------------------------

def found_line(verdict: dict[str, Any]) -> str:
    """Pure: one line of what Gate 0 found."""
    if verdict.get("verdict") == Verdict.ACCEPTED:
        return f"accepted ({verdict.get('compared', 0)} fields compared)"
    found = ", ".join(f"{p} {f} {k}" for p, f, k in differences_of(verdict))
    return (f"{verdict.get('verdict')} by {', '.join(verdict.get('refused_by', [])) or 'no rule'}"
            + (f": {found}" if found else ""))


def differences_of(verdict: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Pure: (process, field, kind) of each difference, sorted."""
    return sorted((str(d.get("process", ENGINE_CORE)), str(d.get("field")), str(d.get("kind")))
                  for d in verdict.get("differences", []))


def mismatches(expect: Expected, verdict: dict[str, Any]) -> list[str]:
    """Pure: each way Gate 0's verdict is not the expected outcome ([] when it is)."""
    out = []
    if verdict.get("verdict") != expect.verdict:
        out.append(f"Gate 0 {verdict.get('verdict')}, expected {expect.verdict}")
    got_rules = [str(r) for r in verdict.get("refused_by", [])]
    if got_rules != expect.refused_by:
        out.append(f"refused by {', '.join(got_rules) or 'no rule'}, expected "
                   f"{', '.join(expect.refused_by) or 'no rule'}")
    want = sorted((d.process, d.field, d.kind) for d in expect.differences)
    got = differences_of(verdict)
    if got != want:
        missing = [" ".join(d) for d in want if d not in got]
        extra = [" ".join(d) for d in got if d not in want]
        out.append("differences: " + ("; ".join(
            ([f"not found {', '.join(missing)}"] if missing else [])
            + ([f"not expected {', '.join(extra)}"] if extra else []))
            or f"{len(got)} found, {len(want)} expected"))
    details = [str(r.get("detail", "")) for r in verdict.get("reasons", [])
               if isinstance(r, dict)]
    out += [f"no reason mentions {m!r}" for m in expect.mentions
            if not any(m in d for d in details)]
    return out


def _lay_out(case: Case, run_dir: Path) -> None:
    """The case as the run folder the gate0 post-step sees: observations/ and preflight.json."""
    observations = run_dir / OBSERVATIONS
    observations.mkdir()
    for name, data in case.files.items():
        with open(observations / name, "xb") as f:
            f.write(data)
    recorded = case.spec.recorded
    with open(run_dir / PREFLIGHT, "x") as f:
        json.dump({"source_seal": {"seal": recorded.seal}, "image": recorded.image}, f)


def _trace_reasons(case: Case, run_dir: Path) -> tuple[list[str], list[str]]:
    """(why the trace does not name the expected calls, one line per change it found)."""
    if case.trace is None:
        return [], []
    try:
        records, bad = read_trace(run_dir / OBSERVATIONS / TRANSITIONS)
    except InputError as e:
        return [e.message], []
    start, end = case.trace.checkpoints
    results = [attribute(records, f, start, end) for f in sorted(case.trace.changed_in)]
    return ([r.text() for r in judge_trace(case.trace, results, bad)],
            [describe(r) for r in results])


def run_case(case: Case | Broken) -> CaseResult:
    """Judge one case with the real Gate 0 in a temporary run folder."""
    if isinstance(case, Broken):
        return CaseResult(case.name, "", False, "not judged", f"unreadable case: {case.why}")
    began = time.monotonic()
    spec = case.spec
    try:
        contract = resolve(None if spec.contract is None else parse_choice(spec.contract))
    except ContractError as e:  # checked at load; a ValueError all the same
        return CaseResult(case.name, spec.proves, False, "not judged", f"contract: {e}")
    with tempfile.TemporaryDirectory(prefix="harness-selftest-") as tmp:
        _lay_out(case, Path(tmp))
        verdict = judge_run(Path(tmp), contract)
        trace_why, traced = _trace_reasons(case, Path(tmp))
    why = mismatches(spec.expect, verdict) + trace_why
    got = "; ".join([found_line(verdict), *traced])
    return CaseResult(case.name, spec.proves, not why, got, "; ".join(why) or None,
                      round(time.monotonic() - began, 3))


# ---- the report ---------------------------------------------------------------------------------

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(value: object) -> str:
    """Text XML 1.0 can hold: a character it cannot is written as an escape."""
    return _XML_BAD.sub(lambda m: f"\\u{ord(m.group(0)):04x}", str(value))


def junit_xml(suite: str, results: list[CaseResult], properties: dict[str, str]) -> bytes:
    """Pure: a JUnit XML document, one <testcase> per result, `properties` on the suite."""
    root = ET.Element("testsuites")
    failed = sum(not r.passed for r in results)
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(results)),
                         failures=str(failed), errors="0", skipped="0",
                         time=f"{sum(r.duration_s for r in results):.3f}")
    props = ET.SubElement(node, "properties")
    for key, value in properties.items():
        ET.SubElement(props, "property", name=_xml_text(key), value=_xml_text(value))
    for r in results:
        case = ET.SubElement(node, "testcase", classname=suite, name=_xml_text(r.name),
                             time=f"{r.duration_s:.3f}")
        if r.proves:
            own = ET.SubElement(case, "properties")
            ET.SubElement(own, "property", name="proves", value=_xml_text(r.proves))
        if not r.passed:
            failure = ET.SubElement(case, "failure", message=_xml_text((r.why or "")[:2000]))
            failure.text = _xml_text(f"{r.why}\ngot: {r.got}")
        out = ET.SubElement(case, "system-out")
        out.text = _xml_text(r.got)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def summary(results: list[CaseResult]) -> tuple[int, int]:
    """Pure: (passed, total)."""
    return sum(r.passed for r in results), len(results)


def unknown(cases: list[Case | Broken], names: tuple[str, ...]) -> list[str]:
    """Pure: the names asked for that no case has."""
    have = {c.name for c in cases}
    return [n for n in names if n not in have]


def select(cases: list[Case | Broken], names: tuple[str, ...]) -> list[Case | Broken]:
    """Pure: the cases named (all when none is), in their order."""
    return [c for c in cases if not names or c.name in names]


def describe_case(case: Case | Broken) -> str:
    """Pure: `NAME: what it proves` (or why it is unreadable), one line."""
    if isinstance(case, Broken):
        return f"{case.name}: unreadable ({case.why})"
    return f"{case.name}: {case.spec.proves}"

"""Gate 0: the start-up and generation observations must name the same engine identity.

Each rule is a pure function of the two documents and the field comparison, returning its
reasons (empty: satisfied). Rules are named and individually switchable, so a test can
remove one, watch its case pass, and restore it: every detector is shown load-bearing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from harness.base.catalogue import (
    GATE0_CONTRACT_MISSING,
    GATE0_FIELD_DIFFERS,
    GATE0_INCOMPLETE,
    GATE0_NOTHING_COMPARED,
    GATE0_PHASE,
    GATE0_PROCESS,
    GATE0_SOURCE,
)
from harness.base.reason import Reason
from harness.base.states import Verdict
from harness.instrument.harness_observer.encode import canonical
from harness.judge import verdictfile
from harness.judge.finalize.compare import compare_fields
from harness.judge.finalize.pins import load_pins

PROCESS_KEYS = ("role", "rank", "pid")
SOURCE_KEYS = ("seal", "engine", "image")

Rule = Callable[[dict, dict, dict], list[str]]


def rule_phase(startup: dict, generation: dict, ctx: dict) -> list[str]:
    if (startup["phase"], generation["phase"]) == ("startup", "generation"):
        return []
    return [f"the phases are {startup['phase']!r} and {generation['phase']!r}, "
            "not 'startup' and 'generation'"]


def rule_process(startup: dict, generation: dict, ctx: dict) -> list[str]:
    return [f"process.{key} differs: startup {startup['process'].get(key)!r}, "
            f"generation {generation['process'].get(key)!r}"
            for key in PROCESS_KEYS
            if canonical(startup["process"].get(key)) != canonical(generation["process"].get(key))]


def rule_source(startup: dict, generation: dict, ctx: dict) -> list[str]:
    reasons = []
    for key in SOURCE_KEYS:
        s, g = startup["source"].get(key), generation["source"].get(key)
        if s != g:
            reasons.append(f"source.{key} differs: startup {s!r}, generation {g!r}")
        elif not s:
            reasons.append(f"source.{key} is not recorded")
    expected = ctx.get("expected_source") or {}
    for key, want in sorted(expected.items()):
        for phase, doc in (("startup", startup), ("generation", generation)):
            if doc["source"].get(key) != want:
                reasons.append(f"{phase} source.{key} is {doc['source'].get(key)!r}, "
                               f"the run recorded {want!r}")
    return reasons


def rule_incomplete(startup: dict, generation: dict, ctx: dict) -> list[str]:
    return [f"the {phase} observation is not complete"
            for phase, doc in (("startup", startup), ("generation", generation))
            if doc["complete"] is not True]


def rule_contract_missing(startup: dict, generation: dict, ctx: dict) -> list[str]:
    missing = ctx["comparison"]["contract_missing"]
    return [f"contract field {name} is missing from an observation" for name in missing]


def rule_field_differs(startup: dict, generation: dict, ctx: dict) -> list[str]:
    return [f"{d['field']} differs ({d['kind']})" for d in ctx["comparison"]["differences"]]


def rule_nothing_compared(startup: dict, generation: dict, ctx: dict) -> list[str]:
    if ctx["comparison"]["compared"] > 0:
        return []
    return ["no field was compared: an empty comparison proves nothing"]


RULES: dict[str, Rule] = {
    GATE0_PHASE: rule_phase,
    GATE0_PROCESS: rule_process,
    GATE0_SOURCE: rule_source,
    GATE0_INCOMPLETE: rule_incomplete,
    GATE0_CONTRACT_MISSING: rule_contract_missing,
    GATE0_FIELD_DIFFERS: rule_field_differs,
    GATE0_NOTHING_COMPARED: rule_nothing_compared,
}


def assess(startup: dict, generation: dict, *, contract: list[str] | None = None,
           pins: dict[str, Any] | None = None, rules: Iterable[str] | None = None,
           expected_source: dict[str, str] | None = None
           ) -> tuple[list[Reason], dict[str, Any]]:
    """(reasons, field comparison) of the Gate-0 rules on two readable observation
    documents: the identity rules' reasons first, then the field rules'. `rules` limits
    which rules apply (default: all); `expected_source` binds the documents to the run's
    own seal and image."""
    enabled = list(RULES) if rules is None else list(rules)
    unknown = [name for name in enabled if name not in RULES]
    if unknown:
        raise ValueError(f"unknown rules: {unknown}")
    comparison = compare_fields(startup["fields"], generation["fields"], contract,
                                load_pins() if pins is None else pins)
    ctx = {"comparison": comparison, "expected_source": expected_source}
    return [Reason(name, text) for name, rule in RULES.items() if name in enabled
            for text in rule(startup, generation, ctx)], comparison


def refused_by(reasons: Iterable[Reason]) -> list[str]:
    """The rules that refused, each once, in the order they were found."""
    return list(dict.fromkeys(r.rule for r in reasons))


def document(reasons: list[Reason], contract: list[str] | None, *,
             differences: list[dict[str, Any]], compared: int,
             **fields: Any) -> dict[str, Any]:
    """A Gate-0 verdict document (verdict.json): the reasons, the rules that gave them,
    every difference with its raw values, how many fields were compared, the contract."""
    return verdictfile.document(reasons, refused_by=refused_by(reasons),
                                differences=differences, compared=compared,
                                contract=None if contract is None else list(contract),
                                **fields)


def judge(startup: dict, generation: dict, *, contract: list[str] | None = None,
          pins: dict[str, Any] | None = None, rules: Iterable[str] | None = None,
          expected_source: dict[str, str] | None = None) -> dict[str, Any]:
    """The Gate-0 verdict on two readable observation documents (`assess`). Differences
    are always listed, raw values exactly as observed."""
    reasons, comparison = assess(startup, generation, contract=contract, pins=pins,
                                 rules=rules, expected_source=expected_source)
    return document(reasons, contract, differences=comparison["differences"],
                    compared=comparison["compared"])


def exit_code(verdict: dict[str, Any]) -> int:
    """0 accepted, 1 refused: the project's exit codes."""
    return 0 if verdict["verdict"] == Verdict.ACCEPTED else 1

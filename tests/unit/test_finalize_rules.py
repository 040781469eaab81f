"""Gate-0 rules: the seed's evidence shape, classification, pins, and paired controls."""

from __future__ import annotations

import copy

import pytest

from harness.judge.finalize.compare import (
    ENCODING_MISMATCH,
    MISSING,
    MISSING_IN_GENERATION,
    MISSING_IN_STARTUP,
    VALUE_CHANGED,
    classify,
    compare_fields,
)
from harness.judge.finalize.explain import render
from harness.judge.finalize.pins import Member, load_pins, member_of
from harness.judge.finalize.rules import RULES, exit_code, judge
from tests.verdicts import texts

PINS = load_pins()
MODE = "vllm.config.compilation.CompilationMode"
GRAPH = "vllm.config.compilation.CUDAGraphMode"
TYPED3 = {"$enum": MODE, "name": "VLLM_COMPILE", "value": 3}


def seed_fields():
    """30 overlapping fields as the seed's enumeration saw them (legacy plain values)."""
    fields = {f"model.f{i}": i for i in range(14)}
    fields.update({f"cache.c{i}": f"v{i}" for i in range(14)})
    start = dict(fields, **{"compilation.custom_ops": ["+sparse_attn_indexer", "none"],
                            "compilation.mode": "VLLM_COMPILE"})
    gen = dict(fields, **{"compilation.custom_ops": ["+sparse_attn_indexer", "none",
                                                     "+sparse_attn_indexer"],
                          "compilation.mode": 3})
    return start, gen


def doc(phase, fields, **over):
    base = {"phase": phase, "process": {"role": "EngineCore", "rank": 0, "pid": 659},
            "source": {"seal": "sha256:s", "engine": "vllm@e126687", "image": "sha256:i"},
            "complete": True, "fields": fields}
    base.update(over)
    return base


def test_seed_evidence_shape_refuses_with_exactly_two_differences():
    start, gen = seed_fields()
    assert len(set(start) & set(gen)) == 30
    verdict = judge(doc("startup", start), doc("generation", gen))
    assert verdict["verdict"] == "refused"
    assert verdict["compared"] == 30
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert verdict["differences"] == [
        {"field": "compilation.custom_ops", "kind": "value-changed",
         "startup": ["+sparse_attn_indexer", "none"],
         "generation": ["+sparse_attn_indexer", "none", "+sparse_attn_indexer"]},
        {"field": "compilation.mode", "kind": "encoding-mismatch",
         "startup": "VLLM_COMPILE", "generation": 3},
    ]
    assert texts(verdict["reasons"]) == [
        "GATE0-FIELD-DIFFERS: compilation.custom_ops differs (value-changed)",
        "GATE0-FIELD-DIFFERS: compilation.mode differs (encoding-mismatch)",
    ]
    assert exit_code(verdict) == 1


def test_identical_documents_are_accepted():
    start, _ = seed_fields()
    verdict = judge(doc("startup", start), doc("generation", copy.deepcopy(start)))
    assert verdict == {"schema": "harness.verdict/v2", "verdict": "accepted", "reasons": [],
                       "refused_by": [], "differences": [], "compared": 30, "contract": None}
    assert exit_code(verdict) == 0


# --- classification --------------------------------------------------------------------

@pytest.mark.parametrize(("field", "s", "g", "kind"), [
    ("compilation.mode", "VLLM_COMPILE", 3, ENCODING_MISMATCH),
    ("compilation.mode", 3, "VLLM_COMPILE", ENCODING_MISMATCH),
    ("compilation.mode", TYPED3, 3, ENCODING_MISMATCH),
    ("compilation.mode", "VLLM_COMPILE", TYPED3, ENCODING_MISMATCH),
    ("compilation.mode", "CompilationMode.VLLM_COMPILE", 3, ENCODING_MISMATCH),
    ("compilation.mode", "VLLM_COMPILE", 2, VALUE_CHANGED),
    ("compilation.mode", "VLLM_COMPILE", True, VALUE_CHANGED),
    ("compilation.mode", 3, 3.0, VALUE_CHANGED),
    ("compilation.mode", "NOT_A_MEMBER", 3, VALUE_CHANGED),
    ("compilation.mode", 7, 3, VALUE_CHANGED),
    ("compilation.mode", {**TYPED3, "value": 4}, 3, VALUE_CHANGED),
    ("compilation.mode", {**TYPED3, "$enum": "other.Mode"}, 3, VALUE_CHANGED),
    ("other.mode", "VLLM_COMPILE", 3, VALUE_CHANGED),
    ("compilation.cudagraph_mode", "FULL_AND_PIECEWISE", {"$tuple": [2, 1]}, ENCODING_MISMATCH),
    ("compilation.cudagraph_mode", "FULL", 2, ENCODING_MISMATCH),
    ("compilation.cudagraph_mode", "PIECEWISE", {"$tuple": [2, 1]}, VALUE_CHANGED),
    ("x", 1, True, VALUE_CHANGED),
    ("x", 4, 4.0, VALUE_CHANGED),
    ("x", [1, 2], [2, 1], VALUE_CHANGED),
    ("x", 1, 1, None),
    ("x", {"a": 1, "b": 2}, {"b": 2, "a": 1}, None),
    ("x", TYPED3, TYPED3, None),
    ("x", MISSING, 1, MISSING_IN_STARTUP),
    ("x", 1, MISSING, MISSING_IN_GENERATION),
    ("x", MISSING, MISSING, None),
    ("x", None, MISSING, MISSING_IN_GENERATION),
])
def test_classify(field, s, g, kind):
    assert classify(field, s, g, PINS) == kind


def test_member_of_uses_only_the_pins():
    assert member_of("compilation.mode", 3, PINS) == Member(MODE, "VLLM_COMPILE", "3")
    assert member_of("compilation.mode", "NONE", PINS) == Member(MODE, "NONE", "0")
    assert member_of("compilation.mode", 3.0, PINS) is None
    assert member_of("compilation.mode", False, PINS) is None
    assert member_of("compilation.mode", "Other.NONE", PINS) is None
    assert member_of("compilation.cudagraph_mode", {"$tuple": [2, 0]}, PINS) == Member(
        GRAPH, "FULL_DECODE_ONLY", '{"$tuple":[2,0]}')
    assert member_of("x", TYPED3, PINS) == Member(MODE, "VLLM_COMPILE", "3")
    assert member_of("x", {"$enum": MODE, "name": "A"}, PINS) is None
    assert member_of("x", 3, PINS) is None


def test_pins_carry_their_source():
    for definition in PINS["enums"].values():
        assert definition["source"]["file"] == "vllm/config/compilation.py"
        assert len(definition["source"]["commit"]) == 40
    assert PINS["enums"][MODE]["source"]["lines"] == "37-48"
    assert PINS["enums"][MODE]["members"] == {"NONE": 0, "STOCK_TORCH_COMPILE": 1,
                                              "DYNAMO_TRACE_ONCE": 2, "VLLM_COMPILE": 3}
    assert load_pins('{"fields": {}, "enums": {}}') == {"fields": {}, "enums": {}}


def test_compare_with_contract_compares_exactly_those_fields():
    start, gen = seed_fields()
    out = compare_fields(start, gen, ["model.f1", "compilation.custom_ops"], PINS)
    assert out["compared"] == 2
    assert [d["field"] for d in out["differences"]] == ["compilation.custom_ops"]
    assert out["contract_missing"] == []
    out = compare_fields({"a": 1}, {"b": 1}, ["a", "b", "c"], PINS)
    assert out["contract_missing"] == ["a", "b", "c"]
    assert out["differences"] == [
        {"field": "a", "kind": MISSING_IN_GENERATION, "startup": 1, "generation": None},
        {"field": "b", "kind": MISSING_IN_STARTUP, "startup": None, "generation": 1}]
    out = compare_fields({"b": 1, "a": 2}, {"c": 3}, None, PINS)
    assert [d["field"] for d in out["differences"]] == ["a", "b", "c"]
    assert out["contract_missing"] == []
    assert out["compared"] == 3


# --- paired controls: each rule removed lets its case through, restored refuses ----------

def _case(rule):
    start, _ = seed_fields()
    s = doc("startup", dict(start))
    g = doc("generation", dict(start))
    contract = None
    if rule == "GATE0-PHASE":
        g["phase"] = "startup"
    elif rule == "GATE0-PROCESS":
        g["process"] = {"role": "EngineCore", "rank": 0, "pid": 660}
    elif rule == "GATE0-SOURCE":
        g["source"] = dict(g["source"], seal="sha256:other")
    elif rule == "GATE0-INCOMPLETE":
        g["complete"] = False
    elif rule == "GATE0-CONTRACT-MISSING":
        contract = ["model.f1", "absent.field"]
    elif rule == "GATE0-FIELD-DIFFERS":
        g["fields"]["compilation.custom_ops"] = ["+sparse_attn_indexer", "none",
                                                 "+sparse_attn_indexer"]
    elif rule == "GATE0-NOTHING-COMPARED":
        s["fields"], g["fields"] = {}, {}
    return s, g, contract


@pytest.mark.parametrize("rule", list(RULES))
def test_paired_control(rule):
    s, g, contract = _case(rule)
    without = judge(s, g, contract=contract, rules=[r for r in RULES if r != rule])
    assert without["verdict"] == "accepted", texts(without["reasons"])
    restored = judge(s, g, contract=contract, rules=list(RULES))
    assert restored["verdict"] == "refused"
    assert restored["refused_by"] == [rule]
    assert all(r.startswith(f"{rule}: ") for r in texts(restored["reasons"]))


def test_a_disabled_rule_does_not_disable_the_rules_after_it():
    s, g, _ = _case("GATE0-FIELD-DIFFERS")
    s["phase"] = "other"
    v = judge(s, g, rules=[r for r in RULES if r != "GATE0-PHASE"])
    assert v["refused_by"] == ["GATE0-FIELD-DIFFERS"]


def test_unknown_rule_is_an_error():
    s, g, _ = _case("GATE0-PHASE")
    with pytest.raises(ValueError, match="unknown rules: \\['GATE0-NOPE'\\]"):
        judge(s, g, rules=["GATE0-NOPE"])


def test_rule_messages_name_values():
    s, g, _ = _case("GATE0-PROCESS")
    g["process"] = {"role": "Worker", "rank": 1, "pid": 660}
    g["phase"] = "warmup"
    v = judge(s, g)
    assert texts(v["reasons"]) == [
        "GATE0-PHASE: the phases are 'startup' and 'warmup', not 'startup' and 'generation'",
        "GATE0-PROCESS: process.role differs: startup 'EngineCore', generation 'Worker'",
        "GATE0-PROCESS: process.rank differs: startup 0, generation 1",
        "GATE0-PROCESS: process.pid differs: startup 659, generation 660",
    ]
    assert v["refused_by"] == ["GATE0-PHASE", "GATE0-PROCESS"]


def test_phase_rule_checks_both_sides():
    s, g, _ = _case("GATE0-PHASE")
    s["phase"], g["phase"] = "generation", "generation"
    assert judge(s, g)["refused_by"] == ["GATE0-PHASE"]
    s["phase"], g["phase"] = "generation", "startup"
    assert judge(s, g)["refused_by"] == ["GATE0-PHASE"]


def test_process_rank_true_is_not_one():
    s, g, _ = _case("GATE0-PHASE")
    g["phase"] = "generation"
    s["process"] = dict(s["process"], rank=1)
    g["process"] = dict(g["process"], rank=True)
    assert judge(s, g)["refused_by"] == ["GATE0-PROCESS"]


def test_source_rule_messages_and_binding():
    s, g, _ = _case("GATE0-SOURCE")
    assert texts(judge(s, g)["reasons"]) == [
        "GATE0-SOURCE: source.seal differs: startup 'sha256:s', generation 'sha256:other'"]
    s, g, _ = _case("GATE0-PHASE")
    g["phase"] = "generation"
    for d in (s, g):
        d["source"] = {"seal": None, "engine": "", "image": "sha256:i"}
    assert texts(judge(s, g)["reasons"]) == ["GATE0-SOURCE: source.seal is not recorded",
                                      "GATE0-SOURCE: source.engine is not recorded"]
    s, g, _ = _case("GATE0-PHASE")
    g["phase"] = "generation"
    v = judge(s, g, expected_source={"seal": "sha256:s", "image": "sha256:run"})
    assert texts(v["reasons"]) == [
        "GATE0-SOURCE: startup source.image is 'sha256:i', the run recorded 'sha256:run'",
        "GATE0-SOURCE: generation source.image is 'sha256:i', the run recorded 'sha256:run'"]
    assert judge(s, g, expected_source={"seal": "sha256:s"})["verdict"] == "accepted"


def test_incomplete_and_contract_messages():
    s, g, _ = _case("GATE0-INCOMPLETE")
    s["complete"] = 1
    assert texts(judge(s, g)["reasons"]) == [
        "GATE0-INCOMPLETE: the startup observation is not complete",
        "GATE0-INCOMPLETE: the generation observation is not complete"]
    s, g, contract = _case("GATE0-CONTRACT-MISSING")
    v = judge(s, g, contract=contract)
    assert texts(v["reasons"]) == [
        "GATE0-CONTRACT-MISSING: contract field absent.field is missing from an observation"]
    assert v["contract"] == contract and v["compared"] == 2
    s, g, _ = _case("GATE0-NOTHING-COMPARED")
    assert texts(judge(s, g)["reasons"]) == [
        "GATE0-NOTHING-COMPARED: no field was compared: an empty comparison proves nothing"]


def test_judge_accepts_custom_pins():
    start, gen = seed_fields()
    no_pins = {"fields": {}, "enums": {}}
    v = judge(doc("startup", start), doc("generation", gen), pins=no_pins)
    assert [d["kind"] for d in v["differences"]] == [VALUE_CHANGED, VALUE_CHANGED]


def test_human_report_names_fields_values_and_rules():
    start, gen = seed_fields()
    text = render(judge(doc("startup", start), doc("generation", gen)))
    assert text == (
        "gate0: refused (30 fields compared)\n"
        "  refused by GATE0-FIELD-DIFFERS: compilation.custom_ops differs (value-changed)\n"
        "  refused by GATE0-FIELD-DIFFERS: compilation.mode differs (encoding-mismatch)\n"
        "  compilation.custom_ops: value-changed\n"
        '    startup:    ["+sparse_attn_indexer", "none"]\n'
        '    generation: ["+sparse_attn_indexer", "none", "+sparse_attn_indexer"]\n'
        "  compilation.mode: encoding-mismatch\n"
        '    startup:    "VLLM_COMPILE"\n'
        "    generation: 3\n")
    assert render(judge(doc("startup", {"k": {"b": "é", "a": 2}}),
                        doc("generation", {}))).splitlines()[-2:] == [
        '    startup:    {"a": 2, "b": "é"}', "    generation: null"]

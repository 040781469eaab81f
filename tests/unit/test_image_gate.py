"""The image gate's judge, without Docker or vLLM: the expectation it reads from a control, the
trace attribution that names the call, and the verdict rules.

The traces here are written by the instrument's own Tracer around small stand-in classes that
do what vLLM 0.33.0 does (a post-init that calls the platform hook; the hook appends to
custom_ops unguarded), so every record has the shape the real trace has. The real-vLLM run
is tests/image_gates (`make test-image-gates`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import types

import pytest

from harness.base.catalogue import GATE0_FIELD_DIFFERS, GATE0_MISSING
from harness.base.readfile import InputError
from harness.config.imagegatespec import CHECKPOINTS, parse_expectation
from harness.config.loader import check
from harness.instrument.harness_observer import snapshot, trace
from harness.judge.finalize.attribute import attribute, describe, read_trace
from harness.judge.poststeps import imagegate
from tests.observations import engine_core, write_companions
from tests.verdicts import texts

CALL2 = "Config.__post_init__ #2"
# `contract: all`: the stand-in config has two fields, not vLLM's identity contract.
EXPECT = {"differences": {"compilation.custom_ops": "value-changed"},
          "changed_in": {"compilation.custom_ops": CALL2}, "contract": "all"}
NOTHING = {"differences": {}, "contract": "all"}


SPARSE = "+sparse_attn_indexer"


@dataclasses.dataclass
class Compilation:
    custom_ops: list = dataclasses.field(default_factory=list)
    mode: int = 3


def scenario(folder, second_post_init=True, between=None):
    """What image_scenario.py does, on stand-ins of vLLM 0.33.0's classes: a post-init that
    calls the platform hook, which appends to custom_ops unguarded. The instrument's tracer
    wraps both; the checkpoints are the plug-in's labels, the documents the plug-in's."""
    tracer = trace.Tracer(str(folder))

    class RocmPlatform:
        @classmethod
        def defaults(cls, vllm_config):
            vllm_config.compilation_config.custom_ops.append(SPARSE)

    @dataclasses.dataclass
    class Config:
        compilation_config: Compilation = dataclasses.field(default_factory=Compilation)

        def __post_init__(self):
            RocmPlatform.defaults(self)

    trace.wrap_method(Config, "__post_init__", tracer, "Config.__post_init__", lambda s: s)
    trace.wrap_method(RocmPlatform, "defaults", tracer, "RocmPlatform.defaults",
                      trace._config_arg)
    cfg = Config()
    tracer.checkpoint(cfg, CHECKPOINTS[0])
    startup = snapshot.observation("startup", cfg, rank=0, hook="test")
    if second_post_init:
        cfg.__post_init__()
    if between:
        between(cfg)
    tracer.checkpoint(cfg, CHECKPOINTS[1])
    return startup, snapshot.observation("generation", cfg, rank=0, hook="test")


def run_folder(tmp_path, monkeypatch, **kwargs):
    """A run folder's observations as the instrument writes them (no run.json: the judge
    then binds the documents to what they say, as gate0 does for such a folder). The engine
    they name is a stand-in module's version: there is no vLLM on this interpreter."""
    monkeypatch.setenv("HARNESS_SEAL", "sha256:" + "5" * 64)
    monkeypatch.setenv("HARNESS_IMAGE_ID", "sha256:" + "1" * 64)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.33.0"))
    obs = tmp_path / "observations"
    obs.mkdir()
    startup, generation = (engine_core(d) for d in scenario(obs, **kwargs))
    snapshot.write_document(str(obs), "startup.json", startup)
    snapshot.write_document(str(obs), "generation.json", generation)
    write_companions(obs, startup, generation)
    return tmp_path


# -- the expectation ---------------------------------------------------------------------------

def test_the_expectation_is_read_whole():
    e = parse_expectation(EXPECT)
    assert e.differences == {"compilation.custom_ops": "value-changed"}
    assert e.changed_in == {"compilation.custom_ops": CALL2}
    assert e.checkpoints == CHECKPOINTS and e.contract == "all"
    assert parse_expectation({"differences": {}}).contract is None  # gate0's default


@pytest.mark.parametrize("options, says", [
    ([], "must be a mapping"),
    ({}, "differences is required"),
    ({"differences": {}, "expect": 1}, "unknown option 'expect'"),
    ({"differences": {"compilation.custom_ops": "changed"}}, "is not one of value-changed"),
    ({"differences": {"custom_ops": "value-changed"}}, "is not a dotted field name"),
    ({"differences": []}, "differences must be a mapping"),
    ({"differences": {}, "changed_in": {"a.b": CALL2}}, "not among the expected differences"),
    ({**EXPECT, "changed_in": {"compilation.custom_ops": "the second one"}}, "a hooked call"),
    ({**EXPECT, "changed_in": {"compilation.custom_ops": "X.y #0"}}, "a hooked call"),
    ({**EXPECT, "checkpoints": ["a", "a"]}, "two different labels"),
    ({**EXPECT, "checkpoints": ["a\nb", "c"]}, "two different labels"),
    ({**EXPECT, "contract": []}, "contract:"),
    ({**EXPECT, "contract": "some"}, "contract:"),
])
def test_a_bad_expectation_is_refused_with_its_reason(options, says):
    with pytest.raises(ValueError, match=says):
        parse_expectation(options)


def test_harness_check_refuses_a_bad_expectation_with_its_position(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("name: g\nimage: rehearsal\ndevice: cpu\ncommand: [python3]\npost_steps:\n"
                    "  - name: image-gate\n    options:\n"
                    "      differences: {compilation.custom_ops: grew}\n")
    faults = check([path])[0]
    assert len(faults) == 1, faults
    assert (faults[0].file, faults[0].line) == (str(path), 6)
    assert "grew" in faults[0].message and "value-changed" in faults[0].message


# -- attribution ---------------------------------------------------------------------------

def test_the_trace_names_the_second_post_init_as_the_call_that_changed_the_field(tmp_path):
    scenario(tmp_path)
    records, bad = read_trace(tmp_path / trace.FILE)
    result = attribute(records, "compilation.custom_ops", *CHECKPOINTS)
    assert bad == 0 and result["found"] and result["errors"] == 0
    assert [c["within"] for c in result["changes"]] == [
        [CALL2, "RocmPlatform.defaults #2"]]
    change = result["changes"][0]
    assert change["before"] == [SPARSE] and change["after"] == [SPARSE, SPARSE]
    assert describe(result) == ("compilation.custom_ops changed in "
                                f"{CALL2} > RocmPlatform.defaults #2")


def test_without_the_second_post_init_nothing_changed_in_the_window(tmp_path):
    scenario(tmp_path, second_post_init=False)
    result = attribute(read_trace(tmp_path / trace.FILE)[0], "compilation.custom_ops",
                       *CHECKPOINTS)
    assert result["found"] and result["changes"] == []
    assert "unchanged between" in describe(result)


def test_an_unhooked_change_is_attributed_to_no_call(tmp_path):
    scenario(tmp_path, second_post_init=False,
             between=lambda cfg: cfg.compilation_config.custom_ops.append("+other"))
    result = attribute(read_trace(tmp_path / trace.FILE)[0], "compilation.custom_ops",
                       *CHECKPOINTS)
    assert [c["within"] for c in result["changes"]] == [[]]
    assert "no hooked call" in describe(result)


def test_a_missing_checkpoint_is_not_found():
    assert attribute([], "compilation.custom_ops", *CHECKPOINTS)["found"] is False


def test_hostile_trace_lines_are_counted_and_never_trusted(tmp_path):
    scenario(tmp_path)
    path = tmp_path / trace.FILE
    good = path.read_text()
    with open(path, "a") as f:
        f.write("not json\n")
        f.write('{"event": "enter", "pid": 1, "hook": "X", "call": NaN, "config_id": 1}\n')
        f.write('{"event": "enter", "pid": 1, "hook": "X\\u001b[2J", "call": 1, '
                '"config_id": 1}\n')
        f.write('{"event": "change", "pid": 1, "field": "a.b", "hook": 5, "before": 1, '
                '"after": 2}\n')
        f.write('{"event": "snapshot", "pid": 1, "label": "a", "label": "b"}\n')
        f.write('[1, 2]\n')
    records, bad = read_trace(path)
    assert bad == 6 and len(records) == len(good.splitlines())


def test_a_trace_that_is_a_symlink_is_unreadable(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    os.symlink(target, tmp_path / trace.FILE)
    with pytest.raises(InputError, match="symlink"):
        read_trace(tmp_path / trace.FILE)
    assert read_trace(tmp_path / "absent.jsonl") == ([], 0)


# -- the verdict -------------------------------------------------------------------------------

def test_the_gate_accepts_exactly_the_expected_finding(tmp_path, monkeypatch):
    verdict = imagegate.evaluate(run_folder(tmp_path, monkeypatch), parse_expectation(EXPECT))
    assert verdict["verdict"] == "accepted", texts(verdict["reasons"])
    assert verdict["gate0"]["refused_by"] == [GATE0_FIELD_DIFFERS]
    assert verdict["attribution"][0]["changes"][0]["within"][0] == CALL2


def test_paired_control_gate0_accepts_when_the_gate_expects_no_difference(tmp_path, monkeypatch):
    folder = run_folder(tmp_path, monkeypatch, second_post_init=False)
    assert imagegate.evaluate(folder, parse_expectation(NOTHING))["verdict"] == "accepted"
    refused = imagegate.evaluate(folder, parse_expectation(EXPECT))
    assert refused["refused_by"] == ["IMAGE-GATE-TRACE", "IMAGE-GATE-VERDICT"]


def test_without_a_contract_the_gate_judges_by_gate0s_default(tmp_path, monkeypatch):
    """As the gate0 post-step: vLLM's identity contract, which the stand-in lacks."""
    folder = run_folder(tmp_path, monkeypatch)
    verdict = imagegate.evaluate(folder, parse_expectation({**EXPECT, "contract": None}))
    assert "GATE0-CONTRACT-MISSING" in verdict["gate0"]["refused_by"]
    assert verdict["refused_by"] == ["IMAGE-GATE-VERDICT"]


def test_a_detector_that_finds_nothing_fails_the_gate(tmp_path, monkeypatch):
    """Paired: the same evidence judged by a Gate 0 whose field rule is gone."""
    folder = run_folder(tmp_path, monkeypatch)
    expect = parse_expectation(EXPECT)
    gate0 = imagegate.judge_run(folder, None)
    assert imagegate.judge_verdict(expect, gate0) == []
    blind = {**gate0, "verdict": "accepted", "refused_by": [], "differences": []}
    reasons = imagegate.judge_verdict(expect, blind)
    assert [r.rule for r in reasons] == ["IMAGE-GATE-VERDICT"] * 2


def test_a_refusal_for_another_rule_is_not_the_expected_one(tmp_path, monkeypatch):
    folder = run_folder(tmp_path, monkeypatch)
    (folder / "observations" / "generation.json").unlink()
    verdict = imagegate.evaluate(folder, parse_expectation(EXPECT))
    assert verdict["gate0"]["refused_by"] == [GATE0_MISSING]
    assert verdict["verdict"] == "refused" and "IMAGE-GATE-VERDICT" in verdict["refused_by"]


def test_a_change_elsewhere_than_the_named_call_fails_the_gate(tmp_path, monkeypatch):
    folder = run_folder(tmp_path, monkeypatch, second_post_init=False,
                        between=lambda cfg: cfg.compilation_config.custom_ops.append("+x"))
    verdict = imagegate.evaluate(folder, parse_expectation(EXPECT))
    assert verdict["refused_by"] == ["IMAGE-GATE-TRACE"]
    assert "changed in no hooked call, not inside " + CALL2 in texts(verdict["reasons"])[0]


def test_the_trace_own_errors_fail_the_gate(tmp_path, monkeypatch):
    folder = run_folder(tmp_path, monkeypatch)
    trace.Tracer(str(folder / "observations")).error("register", RuntimeError("no engine"))
    verdict = imagegate.evaluate(folder, parse_expectation(EXPECT))
    # Gate 0 reads the instrument's errors too (GATE0-INSTRUMENT-ERROR): not the verdict
    # the gate expects of the seed's case
    assert verdict["refused_by"] == ["IMAGE-GATE-TRACE", "IMAGE-GATE-VERDICT"]
    assert "1 error(s)" in " ".join(texts(verdict["reasons"]))
    assert "GATE0-INSTRUMENT-ERROR" in " ".join(texts(verdict["reasons"]))


def test_the_post_step_writes_its_verdict_and_exits_by_it(tmp_path, monkeypatch, capsys):
    folder = run_folder(tmp_path, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    assert imagegate.run(folder, out, EXPECT) == 0
    assert json.loads((out / "verdict.json").read_text())["verdict"] == "accepted"
    printed = capsys.readouterr().out
    assert f"changed in {CALL2}" in printed and printed.endswith("image-gate: accepted\n")
    bad = tmp_path / "bad"
    bad.mkdir()
    assert imagegate.run(folder, bad, {"differences": 1}) == 1
    assert json.loads((bad / "verdict.json").read_text())["refused_by"] == [
        "IMAGE-GATE-OPTIONS"]

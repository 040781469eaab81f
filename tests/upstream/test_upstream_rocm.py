"""The seed's duplicate "+sparse_attn_indexer", reproduced with vLLM's own ROCm hook, traced
by the repo's transition trace, and refused by the repo's Gate-0 finalizer.

The scenario (rocm_scenario.py, one fresh interpreter): VllmConfig() on the ROCm platform,
then RocmPlatform.apply_config_platform_defaults(cfg) twice on that config (start-up
observation after the first direct call, generation observation after the second), then
cfg.__post_init__() again as EngineCore does after its handshake."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import itertools
import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli.finalize import finalize
from harness.judge.finalize.documents import read_document
from harness.judge.finalize.rules import RULES, judge
from tests.upstream.conftest import line_of, source_of

SPARSE = "+sparse_attn_indexer"
HOOK = "RocmPlatform.apply_config_platform_defaults"
POST_INIT = "VllmConfig.__post_init__"
VLLM_COMPILE = {"$enum": "vllm.config.compilation.CompilationMode", "name": "VLLM_COMPILE",
                "value": 3}


def events(scenario: dict, event: str, **match) -> list[dict]:
    return [r for r in scenario["trace"] if r["event"] == event
            and all(r.get(k) == v for k, v in match.items())]


def test_vllms_own_detection_picks_rocm_through_the_standin(rocm_scenario):
    assert rocm_scenario["result"]["platform"] == "vllm.platforms.rocm.RocmPlatform"


def test_the_vllm_files_that_run_are_the_wheels_own(vllm):
    """Nothing was patched: the modules that ran hash as the wheel's RECORD says."""
    files = {str(f): f for f in importlib.metadata.distribution("vllm").files}
    for rel in ("vllm/platforms/rocm.py", "vllm/config/vllm.py", "vllm/config/compilation.py"):
        entry = files[rel]
        algorithm, want = entry.hash.mode, entry.hash.value
        digest = hashlib.new(algorithm, Path(entry.locate()).read_bytes()).digest()
        assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == want, rel


def test_each_hook_call_appends_another_sparse_attn_indexer_to_one_list(rocm_scenario):
    steps = rocm_scenario["result"]["steps"]
    assert [s["label"] for s in steps] == [
        "VllmConfig()", "apply_config_platform_defaults call 1",
        "apply_config_platform_defaults call 2", "VllmConfig.__post_init__ again"]
    assert steps[0]["custom_ops"] == [SPARSE, "none"]
    for before, after in itertools.pairwise(steps):
        assert after["custom_ops"] == before["custom_ops"] + [SPARSE]  # unguarded append
    assert [s["custom_ops"].count(SPARSE) for s in steps] == [1, 2, 3, 4]
    assert len({s["list_id"] for s in steps}) == 1  # mutated in place, never replaced
    assert len({s["config_id"] for s in steps}) == 1
    assert all(s["mode"] == VLLM_COMPILE for s in steps)  # the seed's member, typed


def test_the_trace_records_both_direct_calls_on_the_same_list(rocm_scenario):
    result = rocm_scenario["result"]
    list_id = result["steps"][0]["list_id"]
    config_id = result["steps"][0]["config_id"]
    assert events(rocm_scenario, "error") == []
    assert len(events(rocm_scenario, "enter", hook=HOOK)) == 4
    assert len(events(rocm_scenario, "enter", hook=POST_INIT)) == 2
    appends = events(rocm_scenario, "change", field="compilation.custom_ops", hook=HOOK)
    assert len(appends) == 4
    for change in appends:
        assert change["after"] == change["before"] + [SPARSE]
        assert change["id_before"] == change["id_after"] == list_id
        assert change["config_id"] == config_id
    direct = [c for c in appends if c["stack"][-1].split(":")[0].endswith("rocm_scenario.py")]
    assert [c["after"] for c in direct] == [s["custom_ops"] for s in result["steps"][1:3]]
    assert len({c["stack"][-1] for c in direct}) == 2  # two call sites, told apart


def test_the_trace_attributes_the_post_init_appends_to_vllms_call_site(rocm_scenario):
    vllm_py = source_of("vllm.config.vllm")
    call_site = line_of(vllm_py, "current_platform.apply_config_platform_defaults(self)")
    nested = [c for c in events(rocm_scenario, "change", field="compilation.custom_ops",
                                hook=HOOK)
              if any(f"vllm/config/vllm.py:{call_site} __post_init__" in frame
                     for frame in c["stack"])]
    assert [c["after"].count(SPARSE) for c in nested] == [1, 4]
    guarded = events(rocm_scenario, "change", field="compilation.custom_ops", hook=POST_INIT)
    assert [(c["before"], c["after"]) for c in guarded] == [([SPARSE], [SPARSE, "none"])]


def test_mode_is_one_encoding_in_the_trace_and_the_documents(rocm_scenario):
    modes = events(rocm_scenario, "change", field="compilation.mode")
    assert [(m["before"], m["after"], m["hook"]) for m in modes] == [
        (None, VLLM_COMPILE, POST_INIT)]
    for name in ("startup.json", "generation.json"):
        doc = read_document(rocm_scenario["dir"] / name)
        assert doc["fields"]["compilation.mode"] == VLLM_COMPILE


def documents(scenario: dict) -> tuple[dict, dict]:
    return (read_document(scenario["dir"] / "startup.json"),
            read_document(scenario["dir"] / "generation.json"))


def test_finalize_refuses_the_real_states_with_custom_ops_value_changed(rocm_scenario):
    startup, generation = documents(rocm_scenario)
    steps = rocm_scenario["result"]["steps"]
    assert startup["complete"] and generation["complete"]
    assert startup["process"] == generation["process"]
    verdict = judge(startup, generation)
    assert verdict["verdict"] == "refused"
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert verdict["differences"] == [{
        "field": "compilation.custom_ops", "kind": "value-changed",
        "startup": steps[1]["custom_ops"], "generation": steps[2]["custom_ops"]}]
    assert verdict["compared"] == len(startup["fields"]) > 30


def test_without_the_field_rule_the_real_states_pass(rocm_scenario):
    """Paired control on real data: the refusal rests on the field rule alone."""
    startup, generation = documents(rocm_scenario)
    others = [name for name in RULES if name != "GATE0-FIELD-DIFFERS"]
    assert judge(startup, generation, rules=others)["verdict"] == "accepted"
    assert judge(startup, generation)["verdict"] == "refused"


def test_harness_finalize_command_refuses_with_exit_1(rocm_scenario):
    folder = rocm_scenario["dir"]
    args = ["--startup", str(folder / "startup.json"),
            "--generation", str(folder / "generation.json")]
    as_json = CliRunner().invoke(finalize, [*args, "--json"])
    assert as_json.exit_code == 1, as_json.output
    verdict = json.loads(as_json.output)
    assert verdict["verdict"] == "refused"
    assert [(d["field"], d["kind"]) for d in verdict["differences"]] == [
        ("compilation.custom_ops", "value-changed")]
    human = CliRunner().invoke(finalize, args)
    assert human.exit_code == 1
    assert "compilation.custom_ops: value-changed" in human.output
    assert json.dumps(rocm_scenario["result"]["steps"][2]["custom_ops"]) in human.output

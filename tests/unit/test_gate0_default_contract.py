"""Gate 0's default: without `contract:` the vLLM identity contract is compared, so the
fields vLLM settles after start-up (cache.num_gpu_blocks, ...) never refuse a run; every
field is compared only by choice (`contract: all`, `--all-fields`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.finalize import finalize
from harness.config.fieldlist import (
    ALL,
    SETTLED_AFTER_STARTUP,
    VLLM_IDENTITY,
    ContractError,
    parse_choice,
    resolve,
)
from harness.config.loader import load_campaign, validate
from harness.config.schema import Campaign, Control
from harness.config.yamlsafe import loads
from harness.judge.finalize.contract import rejudge_contract
from harness.judge.finalize.rules import judge
from harness.pipeline.post import argv_for
from tests.verdicts import texts

REPO = Path(__file__).resolve().parents[2]


def doc(phase: str, **fields) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"role": "EngineCore", "rank": 0, "pid": 1},
            "source": {"seal": "s", "engine": "vllm@x", "image": "i"}, "complete": True,
            "fields": fields}


def identity(**over) -> dict:
    """Every identity field with a plain value, then `over` (dots spelled as __)."""
    fields = {name: 1 for name in VLLM_IDENTITY}
    fields.update({k.replace("__", "."): v for k, v in over.items()})
    return fields


def test_the_kv_cache_size_vllm_sets_after_start_up_does_not_refuse():
    start = doc("startup", **identity(cache__num_gpu_blocks=None, model__max_model_len=4096))
    gen = doc("generation", **identity(cache__num_gpu_blocks=8191, model__max_model_len=2048))
    verdict = judge(start, gen, contract=resolve(None))
    assert verdict["verdict"] == "accepted", texts(verdict["reasons"])
    assert verdict["contract"] == list(VLLM_IDENTITY)
    every = judge(start, gen, contract=resolve(ALL))
    assert every["verdict"] == "refused"
    assert [d["field"] for d in every["differences"]] == ["cache.num_gpu_blocks",
                                                          "model.max_model_len"]


def test_an_identity_difference_still_refuses():
    start = doc("startup", **identity())
    gen = doc("generation", **identity(compilation__custom_ops=["+x", "+x"]))
    verdict = judge(start, gen, contract=resolve(None))
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]


def test_the_default_leaves_out_exactly_the_settled_fields_each_with_a_reason():
    assert not set(VLLM_IDENTITY) & set(SETTLED_AFTER_STARTUP)
    assert {"cache.num_gpu_blocks", "model.max_model_len", "scheduler.enable_chunked_prefill",
            "cache.enable_prefix_caching"} <= set(SETTLED_AFTER_STARTUP)
    assert all(len(reason) > 20 for reason in SETTLED_AFTER_STARTUP.values())
    assert len(set(VLLM_IDENTITY)) == len(VLLM_IDENTITY)
    docs = (REPO / "docs" / "gate0-contract.md").read_text()
    for name in (*VLLM_IDENTITY, *SETTLED_AFTER_STARTUP):
        assert f"`{name}`" in docs, name


def test_choices():
    assert parse_choice("all") == ALL
    assert parse_choice(["a.b"]) == ["a.b"]
    assert parse_choice({"fields": ["a.b"]}) == ["a.b"]
    assert resolve(None) == list(VLLM_IDENTITY) and resolve(ALL) is None
    assert resolve(["a.b"]) == ["a.b"]
    for bad in ("everything", "ALL", [], ["a", "a"]):
        with pytest.raises(ContractError):
            parse_choice(bad)


def test_a_campaign_says_all_or_lists_fields_and_anything_else_fails_check():
    base = "name: camp\nrow: R\ncontrols: [c1]\n"
    campaign, found = validate(loads(base + "contract: all\n", "camp.yaml"), Campaign)
    assert found == [] and campaign.contract == ALL
    campaign, found = validate(loads(base, "camp.yaml"), Campaign)
    assert found == [] and campaign.contract is None
    _, found = validate(loads(base + "contract: everything\n", "camp.yaml"), Campaign)
    assert len(found) == 1 and str(found[0]).startswith("camp.yaml:4:"), found
    assert "'all'" in str(found[0])
    control = 'name: c1\nimage: img\ndevice: cpu\ncommand: ["true"]\n'
    _, found = validate(loads(control + "post_steps: [{name: gate0, options: {contract: all}}]"
                              "\n", "c1.yaml"), Control)
    assert found == []


def test_the_shipped_campaigns_keep_their_explicit_contracts():
    for name, missing in (("rehearsal", []), ("kv-warmup-profile", [])):
        loaded, faults = load_campaign(REPO / "campaigns" / f"{name}.yaml")
        assert faults == [], faults
        assert isinstance(loaded.campaign.contract, list)
        assert "cache.num_gpu_blocks" not in loaded.campaign.contract
        assert [f for f in VLLM_IDENTITY if f not in loaded.campaign.contract] == missing


def test_the_campaign_choice_reaches_gate0():
    step = Control.model_validate({"name": "c", "image": "i", "device": "cpu",
                                   "command": ["x"], "post_steps": ["gate0"]}).post_steps[0]

    def options(contract):
        argv = argv_for(step, Path("/r"), Path("/o"), contract)
        return json.loads(argv[argv.index("--options") + 1])

    assert options(None) == {}  # gate0's own default: VLLM_IDENTITY
    assert options("all") == {"contract": "all"}
    assert options(["a.b"]) == {"contract": ["a.b"]}


@pytest.mark.parametrize(("given", "previous", "expected"), [
    (None, {"contract": ["a.b"]}, ["a.b"]),
    (None, {"contract": None}, None),  # judged on every field: re-judged the same way
    (None, None, list(VLLM_IDENTITY)),  # no verdict: today's default
    (None, {"verdict": "refused"}, list(VLLM_IDENTITY)),
    (None, {"contract": [1, 2]}, list(VLLM_IDENTITY)),
    (None, [1], list(VLLM_IDENTITY)),
    ("all", {"contract": ["a.b"]}, None),
    (["c.d"], {"contract": None}, ["c.d"]),
])
def test_rejudge_contract(given, previous, expected):
    assert rejudge_contract(given, previous) == expected


def test_finalize_command_default_and_all_fields(tmp_path):
    s, g = tmp_path / "s.json", tmp_path / "g.json"
    s.write_text(json.dumps(doc("startup", x=1, **{"cache.num_gpu_blocks": None})))
    g.write_text(json.dumps(doc("generation", x=1, **{"cache.num_gpu_blocks": 5})))
    run = CliRunner().invoke(finalize, ["--startup", str(s), "--generation", str(g), "--json"])
    verdict = json.loads(run.output)
    assert run.exit_code == 1 and verdict["refused_by"] == ["GATE0-CONTRACT-MISSING"]
    run = CliRunner().invoke(finalize, ["--startup", str(s), "--generation", str(g),
                                        "--all-fields", "--json"])
    assert run.exit_code == 1
    assert [d["field"] for d in json.loads(run.output)["differences"]] == [
        "cache.num_gpu_blocks"]
    (tmp_path / "c.yaml").write_text("[x]\n")
    run = CliRunner().invoke(finalize, ["--startup", str(s), "--generation", str(g),
                                        "--all-fields", "--contract", str(tmp_path / "c.yaml")])
    assert run.exit_code == 2 and "exclude each other" in run.output

"""The observer against the engine double, on the host Python: driver, plugin, trace, gate0.

Runs `python -m harness_observer.driver` exactly as the container does (PYTHONPATH holds the
instrument folder and the engine double; no harness package on the path), then judges the
observations with the gate0 post-step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.fieldlist import VLLM_IDENTITY
from harness.judge.poststeps import gate0

REPO = Path(__file__).resolve().parents[2]
INSTRUMENT = REPO / "harness" / "instrument"
DOUBLE = REPO / "images" / "rehearsal" / "engine-double"
LEGIT = {"cache.num_gpu_blocks"}  # set by the engine just after start-up (vllm-notes.md)


def run_driver(out: Path, *extra: str, env_extra: dict | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "VLLM_"))}
    env.update({"PYTHONPATH": f"{INSTRUMENT}{os.pathsep}{DOUBLE}",
                "HARNESS_OBSERVATIONS_DIR": str(out), "HARNESS_SEAL": "sha256:seal",
                "HARNESS_IMAGE_ID": "sha256:image", "HARNESS_RUN_ID": "r1",
                **(env_extra or {})})
    return subprocess.run([sys.executable, "-s", "-m",
                           "harness_observer.driver", "--model", "/models/m",
                           "--max-tokens", "3", *extra],
                          cwd=out, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    (run / "observations").mkdir()
    (run / "run.json").write_text(json.dumps({"seal": "sha256:seal",
                                              "image": {"id": "sha256:image"}}))
    r = run_driver(run / "observations")
    assert r.returncode == 0, r.stderr + r.stdout
    run.joinpath("stdout.log").write_text(r.stdout)
    run.joinpath("stderr.log").write_text(r.stderr)
    return run


def records(run: Path) -> list[dict]:
    lines = (run / "observations" / "transitions.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_native_log_lines(run_dir):
    log = (run_dir / "stdout.log").read_text()
    assert "Initializing a V1 LLM engine (v0.0.0+double) with config: " in log
    assert "'mode': <CompilationMode.VLLM_COMPILE: 3>" in log
    for line in ("Available KV cache memory:", "GPU KV cache size:", "Maximum concurrency for",
                 "Model loading took", "Graph capturing finished in",
                 "init engine (profile, create kv cache, warmup model) took"):
        assert f"] {line}" in log
    assert "(EngineCore pid=" in log
    assert json.loads(log.splitlines()[-1])["tokens"] == 3


def test_startup_has_two_custom_ops_generation_three(run_dir):
    start = json.loads((run_dir / "observations" / "startup.json").read_text())
    gen = json.loads((run_dir / "observations" / "generation.json").read_text())
    assert start["fields"]["compilation.custom_ops"] == ["+sparse_attn_indexer", "none"]
    assert gen["fields"]["compilation.custom_ops"] == ["+sparse_attn_indexer", "none",
                                                       "+sparse_attn_indexer"]
    mode = {"$enum": "vllm.config.compilation.CompilationMode", "name": "VLLM_COMPILE",
            "value": 3}
    assert start["fields"]["compilation.mode"] == gen["fields"]["compilation.mode"] == mode
    assert start["process"] == gen["process"]
    assert start["process"]["role"] == "EngineCore"
    assert start["source"] == {"seal": "sha256:seal", "engine": "vllm@0.0.0+double",
                               "image": "sha256:image"}
    assert start["observed"]["config_id"] == gen["observed"]["config_id"]
    assert len(set(start["fields"]) & set(gen["fields"])) == 30
    assert start["complete"] and gen["complete"]


def test_trace_records_both_post_inits_with_stacks_and_one_list(run_dir):
    recs = records(run_dir)
    exits = [r for r in recs if r["event"] == "exit" and r["hook"] == "VllmConfig.__post_init__"]
    assert len(exits) == 2
    front, core = exits
    assert front["process"] == "MainProcess" and core["process"] == "EngineCore"
    assert front["pid"] != core["pid"]
    assert any("arg_utils.py" in frame and "create_engine_config" in frame
               for frame in front["stack"])
    assert any("core.py" in frame and "__init__" in frame for frame in core["stack"])
    assert all(":" in frame for frame in core["stack"])
    ops = "compilation.custom_ops"
    assert core["before"][ops]["value"] == ["+sparse_attn_indexer", "none"]
    assert core["after"][ops]["value"] == ["+sparse_attn_indexer", "none",
                                           "+sparse_attn_indexer"]
    changes = [r for r in recs if r["event"] == "change" and r["pid"] == core["pid"]]
    assert len(changes) == 1
    change = changes[0]
    assert change["hook"] == "RocmPlatform.apply_config_platform_defaults"
    assert change["id_before"] == change["id_after"]  # mutated in place, same list
    snaps = {r["label"]: r for r in recs if r["event"] == "snapshot"}
    assert set(snaps) == {"startup-captured", "worker-startup", "engine-core-generation",
                          "generation-step"}
    list_ids = {s["watched"][ops]["id"] for s in snaps.values()}
    assert list_ids == {change["id_after"], core["before"][ops]["id"]}
    assert {s["config_id"] for s in snaps.values()} == {core["config_id"]}
    order = [r.get("label") or r.get("hook") for r in recs if r["pid"] == core["pid"]]
    assert order.index("startup-captured") < order.index("VllmConfig.__post_init__")
    assert not [r for r in recs if r["event"] == "error"]


def test_gate0_refuses_with_the_custom_ops_difference_only(run_dir, tmp_path):
    start = json.loads((run_dir / "observations" / "startup.json").read_text())
    contract = sorted(set(start["fields"]) - LEGIT)
    assert gate0.run(run_dir, tmp_path, {"contract": contract}) == 1
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    # the uni worker shares the engine core's config object (same pid, same object id):
    # one change, reported once, naming both processes that hold it
    assert [(d["processes"], d["field"], d["kind"]) for d in verdict["differences"]] == [
        (["engine-core", "worker-0"], "compilation.custom_ops", "value-changed")]
    assert verdict["differences"][0]["process"] == "engine-core"
    assert len(verdict["reasons"]) == 1 and "one configuration object" in \
        verdict["reasons"][0]["detail"]
    assert verdict["compared"] == 29
    assert {p["process"]: p["verdict"] for p in verdict["processes"]} == {
        "engine-core": "refused", "frontend": "accepted", "worker-0": "refused"}
    out = tmp_path / "union"
    out.mkdir()
    assert gate0.run(run_dir, out, {"contract": "all"}) == 1
    union = json.loads((out / "verdict.json").read_text())
    assert [d["field"] for d in union["differences"] if d["process"] == "engine-core"] == [
        "cache.num_gpu_blocks", "compilation.custom_ops"]


def test_gate0_without_a_contract_compares_the_vllm_identity(run_dir, tmp_path):
    """No contract: the shipped identity contract, so the KV-cache size vLLM sets after the
    start-up observation does not refuse the run; the real difference still does."""
    assert gate0.run(run_dir, tmp_path, {}) == 1
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert [(d["field"], d["processes"]) for d in verdict["differences"]] == [
        ("compilation.custom_ops", ["engine-core", "worker-0"])]
    assert verdict["contract"] == list(VLLM_IDENTITY)
    assert verdict["compared"] == len(VLLM_IDENTITY)


def test_instrument_is_idle_without_observations_dir(tmp_path):
    r = run_driver(tmp_path, env_extra={"HARNESS_OBSERVATIONS_DIR": ""})
    assert r.returncode == 2
    assert "HARNESS_OBSERVATIONS_DIR must name an existing folder" in r.stderr


def test_plugin_filtered_out_leaves_startup_unwritten(tmp_path):
    """VLLM_PLUGINS naming another plugin: the driver adds its own back; without the driver
    the engine would run unobserved and gate0 would refuse for missing observations."""
    r = run_driver(tmp_path, env_extra={"VLLM_PLUGINS": "someone_else"})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "startup.json").exists()
    assert "Loading general plugin harness_observer" in r.stdout


def test_the_driver_says_which_process_documents_are_there(tmp_path):
    r = run_driver(tmp_path)
    assert r.returncode == 0, r.stderr
    said = [line.removeprefix("harness_observer: ") for line in r.stderr.splitlines()
            if line.endswith((": written", ": MISSING"))]
    assert said == [f"{name}: written" for name in (
        "startup.json", "generation.json", "frontend.startup.json", "frontend.generation.json",
        "worker-0.startup.json", "worker-0.generation.json")]


def test_driver_rejects_bad_engine_args(tmp_path):
    for bad in ("[1]", "{", '{"worker_extension_cls": "x.Y"}', '{"model": "m"}'):
        r = run_driver(tmp_path, "--engine-args-json", bad)
        assert r.returncode == 2, bad
        assert "invalid engine arguments" in r.stderr
    r = run_driver(tmp_path, "--max-tokens", "0")
    assert r.returncode == 2

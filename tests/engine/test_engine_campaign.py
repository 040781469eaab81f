"""The real vLLM engine through `harness run` and `harness night`: what a reviewer of the
engine campaign's evidence must be able to rely on.

One `harness run campaigns/engine-cpu.yaml` (conftest.campaign_run) gives five sealed
runs: vLLM's default multiprocess layout and the one-process layout, both accepted; the
seed's case (a test-only plug-in), refused by Gate 0 in the engine core; a change only
vLLM's own configuration hash sees, and a worker on another engine build (the test-only
case plug-in), each refused by its own rule. The night test runs the one-process control
again as an unattended night.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from harness.instrument.harness_observer.interface import document_name
from harness.judge.finalize.attribute import attribute, read_trace
from tests.campaign_runs import REPO, harness, read_json, runs_by_control

KINDS = {"engine-core": "EngineCore", "frontend": "MainProcess", "worker": "VllmWorker-0"}
PHASES = ("startup", "generation")


def docs(run: Path) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for kind in ("engine-core", "frontend", "worker"):
        out[kind] = {phase: read_json(run / "observations" / document_name(kind, phase))
                     for phase in PHASES}
    return out


def verdict(run: Path) -> dict:
    return read_json(run / "post-steps" / "gate0" / "verdict.json")


def test_the_campaign_seals_every_run_and_refuses_only_the_made_cases(campaign_run):
    runs = campaign_run["runs"]
    assert campaign_run["proc"].returncode == 1  # runs refused, on purpose
    status = {name: read_json(run / "run.json")["status"] for name, run in runs.items()}
    assert status == {"engine-cpu-mp": "accepted", "engine-cpu-inproc": "accepted",
                      "engine-cpu-seed": "refused", "engine-cpu-hidden": "refused",
                      "engine-cpu-build": "refused"}
    for run in runs.values():
        r = harness("verify", str(run), timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr


def test_the_multiprocess_layout_is_observed_in_each_of_its_processes(campaign_run):
    run = campaign_run["runs"]["engine-cpu-mp"]
    found = docs(run)
    pids = {}
    for kind, pair in found.items():
        start, gen = pair["startup"], pair["generation"]
        assert start["process"] == gen["process"], kind
        assert start["process"]["kind"] == kind
        assert start["process"]["role"] == KINDS[kind]
        assert start["complete"] and gen["complete"]
        assert start["source"]["engine"] == "vllm@0.32.0"
        pids[kind] = start["process"]["pid"]
    assert len(set(pids.values())) == 3, pids  # three processes, three configurations
    ids = {kind: pair["startup"]["observed"]["config_id"] for kind, pair in found.items()}
    assert found["worker"]["startup"]["fields"]["parallel.distributed_executor_backend"] == "mp"
    assert verdict(run)["verdict"] == "accepted"
    assert {p["process"]: p["verdict"] for p in verdict(run)["processes"]} == {
        "engine-core": "accepted", "frontend": "accepted", "worker-0": "accepted"}, ids


def test_the_one_process_layout_is_one_process_and_one_configuration(campaign_run):
    run = campaign_run["runs"]["engine-cpu-inproc"]
    found = docs(run)
    assert {pair["startup"]["process"]["pid"] for pair in found.values()} == {
        found["engine-core"]["startup"]["process"]["pid"]}
    assert len({pair[phase]["observed"]["config_id"] for pair in found.values()
                for phase in PHASES}) == 1
    assert verdict(run)["verdict"] == "accepted"


def test_the_seed_case_is_refused_for_the_engine_cores_custom_ops(campaign_run):
    run = campaign_run["runs"]["engine-cpu-seed"]
    v = verdict(run)
    assert v["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert [(d["process"], d["field"], d["kind"]) for d in v["differences"]] == [
        ("engine-core", "compilation.custom_ops", "value-changed")]
    [d] = v["differences"]
    assert d["startup"] == ["+sparse_attn_indexer", "all"]
    assert d["generation"] == ["+sparse_attn_indexer", "all", "+sparse_attn_indexer"]
    # the worker holds its own copy (pickled before the handshake): it never saw the change
    assert {p["process"]: p["verdict"] for p in v["processes"]} == {
        "engine-core": "refused", "frontend": "accepted", "worker-0": "accepted"}
    assert docs(run)["worker"]["generation"]["fields"]["compilation.custom_ops"] == [
        "+sparse_attn_indexer", "all"]
    records, bad = read_trace(run / "observations" / "transitions.jsonl")
    assert bad == 0
    result = attribute(records, "compilation.custom_ops", "startup-captured", "generation-step")
    assert result["found"]
    [change] = result["changes"]
    assert change["process"] == "EngineCore"
    assert change["within"][0] == "VllmConfig.__post_init__ #2"
    assert change["after"] == d["generation"]


def test_every_document_carries_vllms_own_configuration_hash(campaign_run):
    """The second witness is there in every process at every phase, on the real engine, and
    agrees within each pair of the accepted runs."""
    for name, run in campaign_run["runs"].items():
        found = list((run / "observations").glob("*.json"))
        assert len(found) == 6, (name, found)
        for path in found:
            witness = read_json(path)["engine_hash"]
            assert witness["note"] is None, (name, path.name, witness)
            assert len(witness["value"]) == 10 and int(witness["value"], 16) >= 0, witness
    for name in ("engine-cpu-mp", "engine-cpu-inproc"):
        for entry in verdict(campaign_run["runs"][name])["processes"]:
            assert entry["engine_hash"]["compared"] and entry["engine_hash"]["agrees"], entry
    # the seed's change is inside vLLM's hash too: both witnesses saw it, one reason
    seed = verdict(campaign_run["runs"]["engine-cpu-seed"])
    [core] = [e for e in seed["processes"] if e["process"] == "engine-core"]
    assert core["engine_hash"]["agrees"] is False
    assert "outside_engine_hash" not in seed["differences"][0]


def test_a_change_outside_our_encoding_is_refused_by_vllms_own_hash(campaign_run):
    run = campaign_run["runs"]["engine-cpu-hidden"]
    v = verdict(run)
    assert v["refused_by"] == ["GATE0-HASH-DIFFERS"]
    assert v["differences"] == []  # every compared field agrees: our encoding saw nothing
    [reason] = v["reasons"]
    assert "in engine-core (EngineCore, pid" in reason["detail"]
    assert {p["process"]: p["verdict"] for p in v["processes"]} == {
        "engine-core": "refused", "frontend": "accepted", "worker-0": "accepted"}
    core = docs(run)["engine-core"]
    before, after = (core[phase]["engine_hash"]["value"] for phase in PHASES)
    assert before != after and before in reason["detail"] and after in reason["detail"]
    # the flipped field is one the observer never encodes (a private field)
    assert not any("_allow_auto_resolve" in f for f in core["startup"]["fields"])
    # without the plug-in the same engine core generates under the hash it started with
    mp = docs(campaign_run["runs"]["engine-cpu-mp"])["engine-core"]
    assert mp["startup"]["engine_hash"] == mp["generation"]["engine_hash"]


def test_a_worker_on_another_engine_build_is_refused_across_processes(campaign_run):
    run = campaign_run["runs"]["engine-cpu-build"]
    v = verdict(run)
    assert v["refused_by"] == ["GATE0-BUILD-DIFFERS"]
    [reason] = v["reasons"]
    assert reason["detail"].startswith("worker-0 (VllmWorker-0, pid ")
    assert "'vllm@0.32.0+harness-test-other-build', the engine core 'vllm@0.32.0'" \
        in reason["detail"]
    found = docs(run)
    # each pair agrees with itself: only the comparison across processes sees it
    for pair in found.values():
        assert pair["startup"]["source"] == pair["generation"]["source"]
    assert v["differences"] == []


def test_its_pair_without_the_plug_in_is_accepted_and_differs_only_by_it(campaign_run):
    seed, pair = campaign_run["runs"]["engine-cpu-seed"], campaign_run["runs"]["engine-cpu-mp"]
    vector = {r.name: read_json(r / "docker-vector.json")["argv"] for r in (seed, pair)}
    only_seed = set(vector[seed.name]) - set(vector[pair.name])
    assert any("test-only-seed-plugin" in a for a in only_seed), only_seed
    r = harness("diff", str(seed), str(pair), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "engine-core: compilation.custom_ops: differs in a only" in r.stdout
    shown = harness("show", str(seed), timeout=120)
    assert "in engine-core: compilation.custom_ops (value-changed)" in shown.stdout
    assert "in engine-core (EngineCore, pid" in shown.stdout


def test_the_native_log_and_the_memory_figures_it_gives(campaign_run):
    for name, run in campaign_run["runs"].items():
        log = (run / "logs" / "stdout.log").read_text()
        assert "Initializing a V1 LLM engine (v0.32.0)" in log, name
        assert "CPU KV cache size: 1,048,576 tokens" in log, name
        figures = read_json(run / "metrics.json")["metrics"]
        assert figures["kv_tokens"] == 1048576, name
        assert figures["max_concurrency"] == 8192.0
        assert figures["max_model_len"] == 128
        assert isinstance(figures["engine_init_s"], float) and figures["engine_init_s"] > 0
        assert figures["kv_cache_gib"] == 1.0  # VLLM_CPU_KVCACHE_SPACE=1, as the log says
        assert figures["model_load_gib"] is None  # this vLLM prints no such figure on CPU
        notes = read_json(run / "metrics.json")["notes"]
        assert any(n["metric"] == "model_load_gib" and "did not give" in n["note"]
                   for n in notes), notes
        tokens = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        assert [t["tokens"] for t in tokens] == [8], name
        assert figures["generated_tokens"] == 8, name  # the driver's line, read as a figure


def test_a_night_runs_the_real_engine_unattended(engine_ready, tmp_path):
    campaign = tmp_path / "night.yaml"
    campaign.write_text(textwrap.dedent(f"""\
        name: engine-night
        row: ENGINE-NIGHT
        lock: {tmp_path / "gpu.lock"}
        lock_timeout: 10m
        images_lock: {REPO / "images.lock"}
        controls_dir: {REPO / "controls"}
        mount_roots: [{REPO}]
        controls: [engine-cpu-inproc]
        """))
    runs = tmp_path / "runs"
    r = harness("night", str(campaign), "--runs-dir", str(runs), "--no-json-lines",
                timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    [run] = runs_by_control(runs).values()
    assert read_json(run / "run.json")["status"] == "accepted"
    nights = list((runs / "nights").iterdir())
    assert len(nights) == 1 and (nights[0] / "summary.md").is_file()
    assert "engine-cpu-inproc" in (nights[0] / "summary.md").read_text()


def test_the_real_engines_telemetry_has_both_phases_and_no_gap(campaign_run):
    """The container's cgroup sampled over the engine's whole run (about 30 s at 1 Hz):
    samples before the engine core's start-up observation and after it, none missing."""
    run = campaign_run["runs"]["engine-cpu-mp"]
    tele = read_json(run / "run.json")["telemetry"]
    assert tele["sampled"] and tele["gaps"] == 0 and tele["errors"] == 0, tele
    assert tele["samples"] >= 10
    assert set(tele["phases"]) == {"startup", "generation"}
    peak = tele["figures"]["container"]["memory_peak_bytes"]["peak"]
    assert peak > 1 << 30  # torch and vLLM in three processes, and a 1 GiB KV cache
    assert tele["sampler_cpu_pct"] >= 0  # its size is a benchmark's (bench_telemetry.py)
    assert read_json(run / "run.json")["kernel_log"]["readable"]

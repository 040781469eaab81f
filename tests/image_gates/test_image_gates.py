"""The image gates with real vLLM 0.33.0: the instrument's CPU methods inside the pinned image.

One `harness run campaigns/image-gates.yaml` (two controls, through the whole pipeline: cpu
profile, lock, witness, seal), then the sealed evidence is read as a reviewer would:
- image-gate-vllm: vLLM's own load_general_plugins() loaded the observer from the mounted
  instrument; the real VllmConfig on ROCm went through a second __post_init__; Gate 0 refused
  with exactly compilation.custom_ops value-changed; the trace names the second call.
- image-gate-vllm-inproc, its paired control: no second __post_init__, Gate 0 accepts.
- a third run of the same workload with a wrong expectation is refused: the gate can fail.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.base.catalogue import GATE0_FIELD_DIFFERS, IMAGE_GATE_VERDICT
from tests.campaign_runs import REPO, harness, read_json, runs_by_control

SPARSE = "+sparse_attn_indexer"
SECOND = "VllmConfig.__post_init__ #2"
HOOK2 = "RocmPlatform.apply_config_platform_defaults #2"


def verdict_of(run: Path, step: str) -> dict:
    return read_json(run / "post-steps" / step / "verdict.json")


def test_the_campaign_is_accepted_and_every_run_sealed_and_verified(gate_runs):
    proc = gate_runs["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(gate_runs["runs"]) == ["image-gate-engine", "image-gate-vllm",
                                         "image-gate-vllm-inproc"]
    for run in gate_runs["runs"].values():
        assert read_json(run / "run.json")["status"] == "accepted"
        check = subprocess.run(["sha256sum", "-c", "--strict", "--quiet", "SHA256SUMS"],
                               cwd=run, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        verify = harness("verify", str(run))
        assert verify.returncode == 0, verify.stdout + verify.stderr


def test_real_vllm_from_the_mount_loaded_the_observer_through_its_plugin_loader(gate_runs):
    for control, run in gate_runs["runs"].items():
        if control == "image-gate-engine":
            continue  # the real engine, not the scenario (test_the_real_engine_gate)
        scenario = read_json(run / "observations" / "scenario.json")
        assert scenario["vllm"] == "0.33.0", control
        assert scenario["vllm_file"].startswith("/opt/upstream-venv/"), control
        assert scenario["platform"] == "vllm.platforms.rocm.RocmPlatform"
        assert "harness_observer" in scenario["plugins"]
        assert scenario["observer_file"] == "/opt/harness-instrument/harness_observer/plugin.py"
        assert set(scenario["record"].values()) == {"ok"}  # the wheel's bytes, unpatched
        assert scenario["observations"] == [
            "frontend.generation.json", "frontend.startup.json", "generation.json",
            "startup.json", "worker-0.generation.json", "worker-0.startup.json"]
        vector = read_json(run / "docker-vector.json")
        argv = " ".join(vector["argv"])
        assert f"source={REPO}/.upstream-venv,target=/opt/upstream-venv,readonly" in argv
        assert "--network none" in argv


def test_gate0_refuses_exactly_custom_ops_changed_by_the_second_post_init(gate_runs):
    run = gate_runs["runs"]["image-gate-vllm"]
    verdict = verdict_of(run, "image-gate")
    assert verdict["verdict"] == "accepted", verdict["reasons"]
    gate0 = verdict["gate0"]
    assert gate0["verdict"] == "refused" and gate0["refused_by"] == [GATE0_FIELD_DIFFERS]
    # the engine core's, and its uni worker's (the scenario's one-GPU layout: one object,
    # one difference naming both)
    assert [(d["processes"], d["field"], d["kind"]) for d in gate0["differences"]] == [
        (["engine-core", "worker-0"], "compilation.custom_ops", "value-changed")]
    diff = gate0["differences"][0]
    assert diff["startup"].count(SPARSE) == 1 and diff["generation"].count(SPARSE) == 2
    assert gate0["compared"] > 100  # the whole real config, not a handful of fields
    changes = verdict["attribution"][0]["changes"]
    assert [c["within"] for c in changes] == [[SECOND, HOOK2]]
    assert changes[0]["after"] == diff["generation"]
    out = (run / "post-steps" / "image-gate" / "stdout.log").read_text()
    assert f"compilation.custom_ops changed in {SECOND} > {HOOK2}" in out


def test_the_paired_control_without_the_second_post_init_is_accepted_by_gate0(gate_runs):
    verdict = verdict_of(gate_runs["runs"]["image-gate-vllm-inproc"], "image-gate")
    assert verdict["verdict"] == "accepted", verdict["reasons"]
    assert verdict["gate0"]["verdict"] == "accepted"
    assert verdict["gate0"]["differences"] == [] and verdict["gate0"]["compared"] > 100


def test_the_gate_fails_when_the_instrument_does_not_find_what_it_expects(upstream_site,
                                                                          tmp_path):
    """The same workload, expecting no difference: refused, exit 1, with the gate's rule."""
    control = (REPO / "controls" / "image-gate-vllm.yaml").read_text()
    control = control.replace("../", f"{REPO}/").replace(
        "differences: {compilation.custom_ops: value-changed}", "differences: {}").replace(
        '      changed_in: {compilation.custom_ops: "VllmConfig.__post_init__ #2"}\n', "")
    (tmp_path / "controls").mkdir()
    (tmp_path / "controls" / "image-gate-vllm.yaml").write_text(control)
    (tmp_path / "campaigns").mkdir()
    campaign = tmp_path / "campaigns" / "wrong.yaml"
    campaign.write_text(f"name: wrong\nrow: WRONG\nimages_lock: {REPO}/images.lock\n"
                        f"mount_roots: [{REPO}]\ncontrols: [image-gate-vllm]\n")
    proc = harness("run", str(campaign), "--runs-dir", str(tmp_path / "runs"),
                   "--no-json-lines")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = runs_by_control(tmp_path / "runs").values()
    verdict = verdict_of(run, "image-gate")
    assert verdict["refused_by"] == [IMAGE_GATE_VERDICT]
    assert read_json(run / "run.json")["status"] == "refused"


def test_the_real_engine_gate_finds_the_seed_case_in_the_engine_core(gate_runs):
    run = gate_runs["runs"]["image-gate-engine"]
    gate = verdict_of(run, "image-gate")
    assert gate["verdict"] == "accepted", gate["reasons"]
    gate0 = gate["gate0"]
    assert gate0["refused_by"] == [GATE0_FIELD_DIFFERS]
    assert [(d["process"], d["field"]) for d in gate0["differences"]] == [
        ("engine-core", "compilation.custom_ops")]
    [result] = gate["attribution"]
    [change] = result["changes"]
    assert change["within"][0] == SECOND and change["process"] == "EngineCore"
    observed = read_json(run / "observations" / "startup.json")
    assert observed["source"]["engine"] == "vllm@0.32.0"

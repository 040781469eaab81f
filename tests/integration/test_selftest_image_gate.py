"""`harness selftest --image-gate` on the rehearsal image, through the real engine.

An operator's campaign (a temporary project pinning the rehearsal image) names the image;
the selftest stages the shipped scenario's two controls in it and runs them through the
normal pipeline (the project's own GPU lock, sealed run folders in its runs dir). The
engine double stands in for vLLM: its plug-in loader loads the mounted observer, and its
unguarded platform append reproduces the seed's case inside the second post-init."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.base.catalogue import ENV_MISSING_IMAGE, GATE0_FIELD_DIFFERS
from harness.driver.imagescenario import CONTROLS, scenario_dir
from harness.judge.gaterecord.onegate import junit_counts

pytestmark = pytest.mark.docker
SECOND = "VllmConfig.__post_init__ #2"


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def operator_campaign(project) -> Path:
    project.control("c", "command: [/bin/true]\n")
    return project.campaign("op", ["c"], extra="require_approval: true\n")


def by_control(project) -> dict[str, Path]:
    return {read(d / "run.json")["control"]["name"]: d for d in project.run_dirs()}


def test_the_image_gate_passes_in_the_rehearsal_image(project, cleanup_containers) -> None:
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    campaign = operator_campaign(project)
    before = sorted(p.name for p in project.root.iterdir())
    proc = project.harness("selftest", "--image-gate", str(campaign), "--runs-dir", "runs",
                           "--junitxml", str(project.root / "j.xml"), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = by_control(project)
    assert sorted(runs) == sorted(CONTROLS)
    lines = proc.stdout.splitlines()
    for control, run in runs.items():
        record = read(run / "run.json")
        assert record["status"] == "accepted", record["reasons"]
        assert record["image"]["id"] == project.image_id
        assert record["lock"]["path"] == str(project.lock)
        check = subprocess.run(["sha256sum", "-c", "--strict", "--quiet", "SHA256SUMS"],
                               cwd=run, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        assert any(line.startswith(f"passed  rehearsal/{control}: accepted: {run} "
                                   "(SHA256SUMS sha256:") for line in lines)
    assert lines[-1].startswith(f"selftest: image gate 2 of 2 runs accepted in rehearsal "
                                f"({project.image_id}); harness ")
    data = (project.root / "j.xml").read_bytes()
    assert junit_counts(data) == {"tests": 2, "failures": 0, "errors": 0, "skipped": 0}
    assert b'name="harness.version"' in data
    # nothing staged into the operator's project; only the runs and the report are new
    assert sorted(p.name for p in project.root.iterdir()) == sorted([*before, "j.xml", "runs"])


def test_the_gate_rests_on_gate0_finding_the_seed_case_in_the_second_post_init(
        project, cleanup_containers) -> None:
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    proc = project.harness("selftest", "--image-gate", str(operator_campaign(project)),
                           "--runs-dir", "runs", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = by_control(project)
    seed = read(runs["selftest-image-gate"] / "post-steps" / "image-gate" / "verdict.json")
    assert seed["verdict"] == "accepted", seed["reasons"]
    assert seed["gate0"]["refused_by"] == [GATE0_FIELD_DIFFERS]
    assert [(d["processes"], d["field"], d["kind"]) for d in seed["gate0"]["differences"]] == [
        (["engine-core", "worker-0"], "compilation.custom_ops", "value-changed")]
    [change] = seed["attribution"][0]["changes"]
    assert change["within"][0] == SECOND
    pair = read(runs["selftest-image-gate-inproc"] / "post-steps" / "image-gate"
                / "verdict.json")
    assert pair["verdict"] == "accepted" and pair["gate0"]["verdict"] == "accepted"
    scenario = read(runs["selftest-image-gate"] / "observations" / "scenario.json")
    assert scenario["vllm"] == "0.0.0+double"  # the image's own engine, nothing mounted
    assert scenario["vllm_file"].startswith("/usr/local/lib/python3.11/dist-packages/vllm/")
    assert scenario["plugins"] == ["harness_observer"]
    assert scenario["observer_file"] == "/opt/harness-instrument/harness_observer/plugin.py"
    argv = " ".join(read(runs["selftest-image-gate"] / "docker-vector.json")["argv"])
    assert f"source={scenario_dir()},target=/opt/harness-selftest,readonly" in argv
    assert "--network none" in argv


def test_an_image_not_in_the_engine_fails_the_gate_as_the_host_unfit(project) -> None:
    (project.root / "images.lock").write_text(
        f"images:\n  rehearsal:\n    id: {project.image_id}\n    ref: harness-rehearsal:local\n"
        "  absent:\n    id: sha256:" + "0" * 64 + "\n    ref: absent:local\n")
    proc = project.harness("selftest", "--image-gate", str(operator_campaign(project)),
                           "--image", "absent", "--runs-dir", "runs", timeout=300)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAILED  absent/selftest-image-gate: refused" in proc.stdout
    assert f"why: {ENV_MISSING_IMAGE}" in proc.stdout

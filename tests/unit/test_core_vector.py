"""The docker vector is a pure function: safe defaults, exact argv, no secret in clear."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.schema import Control
from harness.measure.vector import Vector, VectorInput, build, looks_secret

IMAGE = "sha256:" + "ab" * 32


def control(**kw) -> Control:
    base = {"name": "c1", "image": "img", "device": "cpu", "command": ["python3", "-V"]}
    base.update(kw)
    return Control.model_validate(base)


def vec(ctl: Control, environ: dict | None = None, **kw) -> Vector:
    inp = VectorInput(control=ctl, image_id=IMAGE, run_id="c1-20260101T000000Z-abcd",
                      campaign="camp", lock_path=Path("/locks/gpu.lock"),
                      cidfile=Path("/runs/r/container.cid"),
                      observations_dir=Path("/runs/r/observations"),
                      instrument_dir=Path("/src/harness/instrument"), **kw)
    return build(inp, environ)


def test_launch_by_id_never_pull_and_command_last():
    argv = vec(control()).argv
    assert argv[:3] == ["docker", "run", "--pull=never"]
    assert argv[-3:] == [IMAGE, "python3", "-V"]
    assert "--privileged" not in argv


def test_network_none_by_default_and_only_when_asked():
    argv = vec(control()).argv
    assert argv[argv.index("--network") + 1] == "none"
    argv = vec(control(network="bridge")).argv
    assert argv[argv.index("--network") + 1] == "bridge"


def test_rocm_profile_flags_and_gpu_selection():
    argv = vec(control(device="rocm", gpus="1")).argv
    joined = " ".join(argv)
    assert "--device /dev/kfd --device /dev/dri" in joined
    assert "--group-add video --group-add render" in joined
    assert "--ipc=host" in argv and "seccomp=unconfined" in argv
    assert "HIP_VISIBLE_DEVICES=1" in argv
    assert "--cap-drop" not in argv


def test_cpu_profile_has_no_devices_and_drops_capabilities():
    argv = vec(control()).argv
    assert "--device" not in argv and "--ipc=host" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "no-new-privileges" in argv


def test_labels_carry_run_id_and_lock():
    argv = vec(control()).argv
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert "org.harness.run-id=c1-20260101T000000Z-abcd" in labels
    assert "org.harness.lock=/locks/gpu.lock" in labels


def test_model_and_instrument_mounts_are_read_only_and_other_mounts_as_asked():
    ctl = control(model={"source": "m", "target": "/models/m", "sha256": {}}, instrument=True,
                  mounts=[{"source": "a", "target": "/a"},
                          {"source": "b", "target": "/b", "read_only": False}])
    argv = vec(ctl, model_source=Path("/host/m"),
               mount_sources=(Path("/host/a"), Path("/host/b"))).argv
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "--mount"]
    assert "type=bind,source=/host/m,target=/models/m,readonly" in mounts
    assert ("type=bind,source=/src/harness/instrument,target=/opt/harness-instrument,readonly"
            in mounts)
    assert "type=bind,source=/host/a,target=/a,readonly" in mounts
    assert "type=bind,source=/host/b,target=/b" in mounts
    assert "PYTHONPATH=/opt/harness-instrument" in argv


def test_secrets_go_by_name_and_evidence_holds_only_their_hash():
    ctl = control(env={"HF_TOKEN": "hunter2", "MODE": "x"}, secrets=["API_KEY"])
    v = vec(ctl, environ={"API_KEY": "s3cret"})
    assert "MODE=x" in v.argv
    assert "HF_TOKEN" in v.argv and "API_KEY" in v.argv
    text = json.dumps(v.evidence())
    assert "hunter2" not in text and "s3cret" not in text
    assert v.passed_env == {"HF_TOKEN": "hunter2", "API_KEY": "s3cret"}
    assert v.evidence()["passed_env"]["API_KEY"].startswith("<redacted sha256:")


@pytest.mark.parametrize("name,secret", [("HF_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True),
                                          ("DB_PASSWORD", True), ("PATH", False),
                                          ("VLLM_USE_V1", False), ("hf_token", True),
                                          ("apiKey", True), ("HFTOKEN", True),
                                          ("openai.api-key", True), ("SECRETS", True),
                                          ("max_num_batched_tokens", False),
                                          ("tokenizer", False), ("TOKENIZERS_PARALLELISM", False),
                                          ("kv_cache_dtype", False)])
def test_secret_names(name, secret):
    assert looks_secret(name) is secret


def test_resources_map_to_limits():
    argv = vec(control(resources={"memory": "256m", "cpus": 1.5, "shm_size": "1g",
                                  "pids": 64})).argv
    j = " ".join(argv)
    assert "--memory 256m --memory-swap 256m" in j
    assert "--cpus 1.5" in j and "--shm-size 1g" in j and "--pids-limit 64" in j


def test_vector_is_deterministic():
    ctl = control(env={"B": "2", "A": "1"})
    assert vec(ctl).argv == vec(ctl).argv


def test_evidence_lists_each_mount_as_declared_and_as_given_to_docker():
    ctl = control(model={"source": "m", "target": "/models/m", "sha256": {}},
                  mounts=[{"source": "a", "target": "/a", "read_only": False}])
    ev = vec(ctl, model_source=Path("/real/m"), model_declared="/host/m",
             mount_sources=(Path("/real/a"),), declared_sources=("/host/a",)).evidence()
    assert ev["mounts"] == [
        {"role": "model", "declared": "/host/m", "source": "/real/m", "target": "/models/m",
         "read_only": True},
        {"role": "observations", "declared": None, "source": "/runs/r/observations",
         "target": "/harness/out", "read_only": False},
        {"role": "control", "declared": "/host/a", "source": "/real/a", "target": "/a",
         "read_only": False}]


def test_launcher_labels_name_the_harness_process():
    argv = vec(control(), launcher={"pid": "7", "started": "1.5", "host": "h"}).argv
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert {"org.harness.launcher-pid=7", "org.harness.launcher-started=1.5",
            "org.harness.launcher-host=h"} <= set(labels)


def test_engine_args_hold_no_secret_value():
    argv = vec(control(engine={"dtype": "bf16", "hf_token": "hunter2"})).argv
    [args] = [a for a in argv if a.startswith("HARNESS_ENGINE_ARGS=")]
    assert json.loads(args.partition("=")[2]) == {
        "dtype": "bf16", "hf_token": {"$harness_secret_env": "HARNESS_ENGINE_SECRET_0"}}
    assert "HARNESS_ENGINE_SECRET_0" in argv and not any("hunter2" in a for a in argv)

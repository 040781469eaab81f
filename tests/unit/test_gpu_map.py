"""The host's GPU map (Slurm GPU index -> render node): the file, gres.conf, the job's
indexes, and the docker vector a Slurm job gets from them. Pure, no Docker, no GPU.

    HARNESS_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/unit/test_gpu_map.py
rewrites the golden vectors (tests/fixtures/vector); review the diff before committing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.base.bounds import BadText
from harness.base.catalogue import ENV_GPU_MAP
from harness.base.errors import InvalidInput
from harness.config import gpumapfile
from harness.config.schema import Control
from harness.config.yamlsafe import loads
from harness.measure.slurm import gres, identity
from harness.measure.vector import ROCM_FLAGS, VectorInput, build

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "vector"
REGEN = os.environ.get("HARNESS_REGEN_GOLDEN") == "1"
MAP = "gpus:\n  0: /dev/dri/renderD128\n  1: /dev/dri/renderD129\n"


def parsed(text: str):
    return gpumapfile.parse(loads(text, "map.yaml"))


def faults(text: str) -> list[str]:
    gmap, found = parsed(text)
    assert gmap is None
    return [str(f) for f in found]


# --------------------------------------------------------------------------- the file


def test_a_valid_map_reads_indexes_as_numbers_with_their_lines():
    gmap, found = parsed(MAP)
    assert found == [] and gmap is not None
    assert gmap.gpus == {0: "/dev/dri/renderD128", 1: "/dev/dri/renderD129"}
    assert gmap.lines == {0: 2, 1: 3}
    assert gmap.describe() == "0 -> /dev/dri/renderD128, 1 -> /dev/dri/renderD129"


@pytest.mark.parametrize("text, expected", [
    ("gpus:\n  0: /dev/dri/renderD128\n  1: /dev/dri/renderD128\n",
     "map.yaml:3:6: GPU 1: /dev/dri/renderD128 is already GPU 0's (line 2)"),
    ("gpus:\n  0: /dev/dri/renderD128\n  0: /dev/dri/renderD129\n",
     "map.yaml:3:3: duplicate key '0'"),
    ("gpus:\n  01: /dev/dri/renderD128\n", "map.yaml:2:3: GPU index '01' must be"),
    ("gpus:\n  -1: /dev/dri/renderD128\n", "map.yaml:2:3: GPU index '-1' must be"),
    ("gpus:\n  0: dev/dri/renderD128\n", "map.yaml:2:6: GPU 0: render node must be an absolute"),
    ("gpus:\n  0: /dev/dri/renderD128:rwm\n", "map.yaml:2:6: GPU 0: render node must be"),
    ("gpus:\n  0: /dev/dri,/dev/kfd\n", "map.yaml:2:6: GPU 0: render node must be"),
    ("gpus:\n  0: /dev/dri/../kfd\n", "map.yaml:2:6: GPU 0: render node must be normalised"),
    ("gpus:\n  0: [/dev/dri/renderD128]\n", "map.yaml:2:6: GPU 0: render node must be a "
     "device path (text), not list"),
    ("gpus: {}\n", "map.yaml:1:7: 'gpus' must map each Slurm GPU index"),
    ("gpu:\n  0: /dev/dri/renderD128\n", "map.yaml:1:1: unknown key 'gpu'"),
    ("", "map.yaml:1:1: expected a mapping with a 'gpus' key, got empty"),
])
def test_every_fault_has_its_position(text, expected):
    try:
        found = faults(text)
    except Exception as e:  # the YAML layer's own faults (duplicate keys)
        found = [str(f) for f in e.faults]
    assert any(f.startswith(expected) for f in found), found


def test_load_map_raises_invalid_input_with_positions(tmp_path):
    bad = tmp_path / "gpu-map.yaml"
    bad.write_text("gpus:\n  0: /dev/dri/renderD128\n  1: relative\n")
    with pytest.raises(InvalidInput) as e:
        gpumapfile.load_map(bad)
    assert e.value.code == 2
    assert e.value.faults[0].startswith(f"{bad}:3:6: GPU 1: render node")
    good = tmp_path / "ok.yaml"
    good.write_text(MAP)
    assert gpumapfile.load_map(good).gpus[1] == "/dev/dri/renderD129"


def test_where_the_map_is_read_from():
    assert gpumapfile.map_path({}) == Path("/etc/harness/gpu-map.yaml")
    assert gpumapfile.map_path({"HARNESS_GPU_MAP": "/site/map.yaml"}) == Path("/site/map.yaml")
    assert gpumapfile.map_path({"HARNESS_GPU_MAP": "/site/map.yaml"}, Path("/x.yaml")) \
        == Path("/x.yaml")


def test_nodes_for_keeps_slurm_order_and_names_what_is_missing():
    gmap, _ = parsed(MAP)
    assert gpumapfile.nodes_for(gmap, (1, 0)) == (
        ("/dev/dri/renderD129", "/dev/dri/renderD128"), [])
    assert gpumapfile.nodes_for(gmap, (1, 2, 3)) == (("/dev/dri/renderD129",), [2, 3])


# --------------------------------------------------------------------------- the job's GPUs


@pytest.mark.parametrize("value, expected", [
    ("1", (1,)), ("0,1", (0, 1)), ("3,1,3", (3, 1)), ("", None), ("0-1", None),
    ("1;rm -rf /", None), ("a", None), (",1", None),
])
def test_gpu_indexes_are_read_strictly(value, expected):
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": value} if value else {"SLURM_JOB_ID": "7"}
    assert identity.gpu_indexes(env) == expected


# --------------------------------------------------------------------------- gres.conf


GRES = """\
AutoDetect=off   # explicit render nodes
NodeName=gpu[01-02,07] Name=gpu Type=gfx1100 File=/dev/dri/renderD[128-129] Flags=amd_gpu_env
nodename=gpu03 name=GPU file=/dev/dri/renderD130
NodeName=gpu03 Name=gpu File=/dev/dri/renderD128
Name=gpu File=/dev/dri/renderD200
NodeName=gpu04 Name=mps Count=100
"""


def test_gres_files_per_node_in_file_order():
    assert gres.gpu_files(GRES, "gpu07") == ["/dev/dri/renderD128", "/dev/dri/renderD129",
                                             "/dev/dri/renderD200"]
    assert gres.gpu_files(GRES, "gpu03") == ["/dev/dri/renderD130", "/dev/dri/renderD128",
                                             "/dev/dri/renderD200"]
    assert gres.gpu_files("AutoDetect=rsmi\nName=gpu Type=gfx1100 Count=2\n", "n1") is None
    assert gres.gpu_files("NodeName=other Name=gpu File=/dev/x\n", "n1") is None
    with pytest.raises(BadText, match=r"^gres.conf line 1: range '1-x': its high end "):
        gres.gpu_files("NodeName=n[1-x] Name=gpu File=/dev/x\n", "n1")


def test_hostlist_expansion():
    assert gres.expand("gpu[01-03,7]") == ["gpu01", "gpu02", "gpu03", "gpu7"]
    assert gres.expand("a,b[1-2]") == ["a", "b1", "b2"]
    with pytest.raises(BadText, match="reversed"):
        gres.expand("n[3-1]")
    with pytest.raises(BadText, match="more than 4096"):  # bounded
        gres.expand("n[0-99999]")
    assert gres.gres_conf_path({"SLURM_CONF": "/opt/slurm/etc/slurm.conf"}) \
        == Path("/opt/slurm/etc/gres.conf")
    assert gres.gres_conf_path({}) == Path("/etc/slurm/gres.conf")


# --------------------------------------------------------------------------- the vector


def control(**kw) -> Control:
    return Control.model_validate({"name": "serve", "image": "img", "device": "rocm",
                                   "command": ["python3", "-m", "vllm"], **kw})


def vinput(ctl: Control, **kw) -> VectorInput:
    return VectorInput(control=ctl, image_id="sha256:" + "ab" * 32,
                       run_id="serve-20261201T021500Z-0a1b2c3d", campaign="night",
                       lock_path=Path("/var/lib/harness/gpu.lock"),
                       cidfile=Path("/runs/r/container.cid"),
                       observations_dir=Path("/runs/r/observations"),
                       instrument_dir=Path("/src/harness/instrument"), **kw)


CASES = {
    "rocm-slurm-one-gpu": (control(), {"slurm_job": "4711",
                                       "render_nodes": ("/dev/dri/renderD129",)}),
    "rocm-slurm-two-gpus": (control(), {"slurm_job": "4712", "render_nodes": (
        "/dev/dri/renderD129", "/dev/dri/renderD128")}),
    "rocm-one-host": (control(), {}),
}
HOST = {"ROCR_VISIBLE_DEVICES": "1", "SLURM_JOB_GPUS": "1", "HIP_VISIBLE_DEVICES": "1"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_vector(case):
    ctl, kw = CASES[case]
    argv = build(vinput(ctl, **kw), HOST).argv
    golden = GOLDEN / f"{case}.argv.json"
    if REGEN:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(argv, indent=1) + "\n")
    assert argv == json.loads(golden.read_text())


def test_a_slurm_job_gets_kfd_and_its_render_nodes_never_all_of_dri():
    argv = build(vinput(control(), render_nodes=("/dev/dri/renderD129",)), HOST).argv
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "--device"]
    assert devices == ["/dev/kfd", "/dev/dri/renderD129"]
    assert "/dev/dri" not in argv
    assert not any("ROCR_VISIBLE_DEVICES" in a or "SLURM_JOB_GPUS" in a for a in argv)
    one_host = build(vinput(control()), HOST).argv
    assert [one_host[i + 1] for i, a in enumerate(one_host) if a == "--device"] \
        == ["/dev/kfd", "/dev/dri"]
    assert all(flag in one_host for flag in ROCM_FLAGS)


def test_the_cpu_profile_is_unchanged_by_render_nodes():
    cpu = control(device="cpu")
    assert build(vinput(cpu, render_nodes=("/dev/dri/renderD129",))).argv \
        == build(vinput(cpu)).argv


@pytest.mark.parametrize("nodes", [(), ("/dev/dri/renderD128:/dev/kfd",), ("renderD128",),
                                   ("/dev/dri/../kfd",), ("/dev/dri/renderD128,rw",)])
def test_an_unsafe_or_empty_render_node_builds_nothing(nodes):
    with pytest.raises(InvalidInput) as e:
        build(vinput(control(), render_nodes=nodes))
    assert e.value.rule == ENV_GPU_MAP


@pytest.mark.parametrize("name", ["ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"])
def test_a_host_device_mask_is_never_passed_by_name(name):
    with pytest.raises(InvalidInput, match="device mask"):
        build(vinput(control(secrets=[name])), {name: "1"})

"""The doctor's GPU map lines, the job's render nodes in preflight, and the drain command.

Devices are fake character devices (`mknod PATH c 1 3`, the numbers of /dev/null, never
opened) in a temp folder, as scripts/slurm-cluster.sh makes them; never a real GPU. Tests
that need mknod are skipped without root.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.judge.doctor import gpulines as dmap
from harness.judge.doctor.checks import DeviceNode
from harness.measure.slurm.calls import DRAIN_REASON_MAX, drain_argv
from harness.pipeline.preflight import job_render_nodes
from harness.probe.doctor.gpufacts import gather

HARNESS = str(Path(sys.executable).parent / "harness")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def fake_gpus(folder: Path, *numbers: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for n in numbers:
        path = folder / f"renderD{n}"
        os.mknod(path, 0o660 | stat.S_IFCHR, os.makedev(1, 3))
        out.append(str(path))
    return out


def write_map(path: Path, nodes: dict[int, str]) -> Path:
    path.write_text("gpus:\n" + "".join(f"  {i}: {p}\n" for i, p in nodes.items()))
    return path


def write_gres(path: Path, node: str, files: list[str]) -> Path:
    path.write_text("AutoDetect=off\n" + "".join(
        f"NodeName={node} Name=gpu Type=gfx1100 File={f} Flags=amd_gpu_env\n" for f in files))
    return path


def lines(facts: dmap.MapFacts) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.detail) for c in dmap.judge(facts)}


# --------------------------------------------------------------------------- pure judges


def test_no_map_and_no_need_gives_no_line_but_a_slurm_gpu_node_fails():
    assert dmap.judge(dmap.MapFacts("/etc/harness/gpu-map.yaml", required=False)) == []
    got = lines(dmap.MapFacts("/etc/harness/gpu-map.yaml", required=True))
    assert got["gpu-map"][0] == "fail" and "no GPU map at /etc/harness/gpu-map.yaml" \
        in got["gpu-map"][1]
    assert "gpu-map-gres" not in got


def test_an_invalid_map_is_a_fail_line_with_its_position():
    got = lines(dmap.MapFacts("m.yaml", required=False, error="m.yaml:3:6: GPU 1: ..."))
    assert got == {"gpu-map": ("fail", "m.yaml:3:6: GPU 1: ...")}


def test_devices_that_are_missing_not_character_or_the_same_fail():
    from harness.config.gpumapfile import GpuMap

    gmap = GpuMap("m.yaml", {0: "/d/r128", 1: "/d/r129", 2: "/d/file", 3: "/d/link"})
    chr_mode = stat.S_IFCHR | 0o660
    facts = dmap.MapFacts("m.yaml", True, gmap, devices={
        "/d/r128": DeviceNode("/d/r128", True, chr_mode),
        "/d/r129": DeviceNode("/d/r129", False),
        "/d/file": DeviceNode("/d/file", True, stat.S_IFREG | 0o644),
        "/d/link": DeviceNode("/d/link", True, chr_mode)},
        real={"/d/link": "/d/r128"}, gres_where="/etc/slurm/gres.conf", node="n1",
        gres_files=["/d/r128", "/d/r129", "/d/file", "/d/link"])
    status, detail = lines(facts)["gpu-map"]
    assert status == "fail"
    assert "GPU 1: /d/r129 does not exist" in detail
    assert "GPU 2: /d/file is not a character device" in detail
    assert "GPU 3 and GPU 0 are the same device /d/r128" in detail


def test_gres_comparison_index_by_index():
    from harness.config.gpumapfile import GpuMap

    gmap = GpuMap("m.yaml", {0: "/d/r128", 1: "/d/r129"})
    base = {"path": "m.yaml", "required": True, "gmap": gmap, "node": "n1",
            "gres_where": "/etc/slurm/gres.conf"}
    ok = lines(dmap.MapFacts(**base, gres_files=["/d/r128", "/d/r129"]))["gpu-map-gres"]
    assert ok[0] == "ok" and "node n1's 2 GPU(s)" in ok[1]
    swapped = lines(dmap.MapFacts(**base, gres_files=["/d/r129", "/d/r128"]))["gpu-map-gres"]
    assert swapped[0] == "fail"
    assert "GPU 0: the map says /d/r128, gres.conf says /d/r129" in swapped[1]
    more = lines(dmap.MapFacts(**base, gres_files=["/d/r128", "/d/r129", "/d/r130"]))
    assert "GPU 2 (/d/r130) is missing from the map" in more["gpu-map-gres"][1]
    fewer = lines(dmap.MapFacts(**base, gres_files=["/d/r128"]))
    assert "GPU 1: node n1 has only 1 GPU(s) in gres.conf" in fewer["gpu-map-gres"][1]
    unknown = lines(dmap.MapFacts(**base, gres_files=None))["gpu-map-gres"]
    assert unknown[0] == "warn" and "indexes not compared" in unknown[1]


# --------------------------------------------------------------------------- with devices


@root_only
def test_gather_reads_a_map_of_fake_devices_and_gres(tmp_path):
    devs = fake_gpus(tmp_path / "dev", 128, 129)
    path = write_map(tmp_path / "map.yaml", dict(enumerate(devs)))
    conf = write_gres(tmp_path / "gres.conf", "node2", devs)
    env = {"SLURMD_NODENAME": "node2"}
    facts = gather(env, given=path, required=True, gres_conf=conf)
    assert lines(facts) == {
        "gpu-map": ("ok", f"{path}: 2 GPU(s): 0 -> {devs[0]}, 1 -> {devs[1]}"),
        "gpu-map-gres": ("ok", f"matches {conf}: node node2's 2 GPU(s), index by index")}
    other = gather({"SLURMD_NODENAME": "node1"}, given=path, required=True,
                        gres_conf=conf)
    assert lines(other)["gpu-map-gres"][0] == "warn"  # gres.conf names no GPU of node1
    (tmp_path / "dev" / "renderD129").unlink()
    (tmp_path / "dev" / "renderD129").write_text("")
    broken = lines(gather(env, given=path, required=True, gres_conf=conf))
    assert broken["gpu-map"] == ("fail", f"{path}: GPU 1: {devs[1]} is not a character "
                                 "device")


def harness(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([HARNESS, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@root_only
def test_the_doctor_command_exits_2_on_an_invalid_map_and_1_on_a_broken_one(tmp_path):
    devs = fake_gpus(tmp_path / "dev", 128)
    common = ["doctor", "--lock", str(tmp_path / "gpu.lock"), "--runs-dir", str(tmp_path),
              "--images-lock", str(tmp_path / "none.lock"), "--profile", "cpu"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus:\n  0: " + devs[0] + "\n  1: " + devs[0] + "\n")
    r = harness(*common, "--gpu-map", str(bad))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{bad}:3:6: GPU 1: {devs[0]} is already GPU 0's" in r.stderr
    # the map HARNESS_GPU_MAP names is checked too, and an invalid one is bad input
    r = harness(*common, env={"HARNESS_GPU_MAP": str(bad)})
    assert r.returncode == 2, r.stdout + r.stderr
    missing = write_map(tmp_path / "missing.yaml", {0: devs[0], 1: str(tmp_path / "dev/x")})
    r = harness(*common, "--gpu-map", str(missing))
    assert r.returncode == 1
    assert any(line.startswith("fail  gpu-map") and "does not exist" in line
               for line in r.stdout.splitlines()), r.stdout


# --------------------------------------------------------------------------- preflight


@root_only
def test_a_job_gets_the_render_nodes_of_its_indexes(tmp_path):
    devs = fake_gpus(tmp_path / "dev", 128, 129)
    path = write_map(tmp_path / "map.yaml", dict(enumerate(devs)))
    env = {"SLURM_JOB_ID": "9", "SLURM_JOB_GPUS": "1", "HARNESS_GPU_MAP": str(path)}
    assert job_render_nodes(env) == ((devs[1],), None)
    assert job_render_nodes({**env, "SLURM_JOB_GPUS": "1,0"}) == ((devs[1], devs[0]), None)


@root_only
def test_a_job_whose_gpus_the_map_lacks_is_refused_with_a_reason(tmp_path):
    devs = fake_gpus(tmp_path / "dev", 128)
    path = write_map(tmp_path / "map.yaml", {0: devs[0], 1: str(tmp_path / "dev/gone")})
    env = {"SLURM_JOB_ID": "9", "HARNESS_GPU_MAP": str(path)}
    cases = {
        "": "names no allocated GPU",
        "2": f"Slurm allocated GPU(s) 2, which the GPU map {path} does not name",
        "1": f"names {tmp_path}/dev/gone, which is not a character device",
    }
    for gpus, why in cases.items():
        nodes, problem = job_render_nodes({**env, "SLURM_JOB_GPUS": gpus} if gpus else env)
        assert nodes == () and problem is not None and why in problem, problem
    _, problem = job_render_nodes({**env, "SLURM_JOB_GPUS": "0",
                                   "HARNESS_GPU_MAP": str(tmp_path / "absent.yaml")})
    assert problem is not None and problem.startswith(f"no GPU map at {tmp_path}/absent.yaml")
    (tmp_path / "bad.yaml").write_text("gpus:\n  0: nope\n")
    _, problem = job_render_nodes({**env, "SLURM_JOB_GPUS": "0",
                                   "HARNESS_GPU_MAP": str(tmp_path / "bad.yaml")})
    assert problem is not None and f"{tmp_path}/bad.yaml:2:6: GPU 0" in problem


# --------------------------------------------------------------------------- drain


def test_drain_argv_is_one_node_and_a_one_line_bounded_reason():
    argv = drain_argv("node2", "harness doctor: gpu-map: bad\nState=RESUME \x1b[31m")
    assert argv[:4] == ["scontrol", "update", "NodeName=node2", "State=DRAIN"]
    assert argv[4] == "Reason=harness doctor: gpu-map: bad State=RESUME [31m"
    assert len(drain_argv("n1", "x" * 999)[4]) == len("Reason=") + DRAIN_REASON_MAX
    for node in ("node[1-9]", "n1,n2", "", "-x", "a b"):
        with pytest.raises(InvalidInput):
            drain_argv(node, "r")


@root_only
def test_preflight_finds_the_nodes_only_for_a_rocm_control_in_a_job(tmp_path, monkeypatch):
    import os

    from harness.base.catalogue import ENV_GPU_MAP
    from harness.pipeline.preflight import render_nodes

    devs = fake_gpus(tmp_path / "dev", 128, 129)
    monkeypatch.setenv("HARNESS_GPU_MAP", str(write_map(tmp_path / "m.yaml", {0: devs[0]})))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)

    assert render_nodes("rocm", os.environ) == (None, [])  # one host: every render node
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    assert render_nodes("cpu", os.environ) == (None, [])
    assert render_nodes("rocm", os.environ) == ((devs[0],), [])
    monkeypatch.setenv("SLURM_JOB_GPUS", "1")
    nodes, (reason,) = render_nodes("rocm", os.environ)
    assert reason.rule == ENV_GPU_MAP and nodes is None

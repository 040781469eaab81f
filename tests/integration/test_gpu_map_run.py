"""A real `harness run` of a rocm control inside a (simulated) Slurm job whose GPU the host's
GPU map does not name: refused in preflight with ENV-GPU-MAP, sealed, no container started.

The job's variables are set by hand (what slurmd would set); the Docker engine is real."""

from __future__ import annotations

import os

from ..conftest import Project, containers_with_label


def test_a_job_whose_gpu_is_not_in_the_map_is_refused_before_any_container(
        project: Project, cleanup_containers) -> None:
    ctl = project.control("serve", 'command: ["true"]\n')
    ctl.write_text(ctl.read_text().replace("device: cpu", "device: rocm"))
    camp = project.campaign("gpu-map", ["serve"])
    gpu_map = project.root / "gpu-map.yaml"
    gpu_map.write_text("gpus:\n  0: /dev/dri/renderD128\n")
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    env = {**os.environ, "SLURM_JOB_ID": "4711", "SLURM_JOB_GPUS": "1",
           "SLURMD_NODENAME": "node2", "ROCR_VISIBLE_DEVICES": "1",
           "HARNESS_GPU_MAP": str(gpu_map)}
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs), env=env)
    assert r.returncode == 3, r.stdout + r.stderr
    (run_dir,) = project.run_dirs()
    record = project.record(run_dir)
    # (this host has no /dev/kfd: ENV-DEVICE lines come too; the map's is its own)
    assert {"by": "harness", "rule": "ENV-GPU-MAP",
            "detail": f"Slurm allocated GPU(s) 1, which the GPU map {gpu_map} does not name "
                      "(0 -> /dev/dri/renderD128)"} in record["reasons"], record["reasons"]
    assert record["slurm"]["gpus"] == "1"
    assert not (run_dir / "docker-vector.json").exists()
    assert containers_with_label(label) == []
    assert project.harness("verify", str(run_dir)).returncode == 0

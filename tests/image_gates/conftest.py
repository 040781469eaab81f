"""Fixtures of the image gates: the instrument inside the pinned image, with real vLLM.

Run by `make test-image-gates`: the harness's own .venv runs `harness run` on
campaigns/image-gates.yaml, whose controls mount the upstream tier's vLLM 0.33.0
(.upstream-venv, built by scripts/upstream-venv.sh) read-only into the rehearsal image.
Without that venv, the engine or the image every test here fails, saying what is missing:
the tier never skips, because a skipped gate would look like a passing one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.campaign_runs import REPO, harness, read_json, runs_by_control

VENV_SITE = REPO / ".upstream-venv" / "lib" / "python3.11" / "site-packages"
CAMPAIGN = REPO / "campaigns" / "image-gates.yaml"


@pytest.fixture(scope="session")
def upstream_site() -> Path:
    if not (VENV_SITE / "vllm" / "__init__.py").is_file():
        pytest.fail(f"no vLLM under {VENV_SITE}: build it with `bash scripts/upstream-venv.sh` "
                    "(or run `make test-image-gates`, which does)", pytrace=False)
    return VENV_SITE


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the gate's run folders land: $IMAGE_GATE_RUNS (relative to the project; the
    kv-warmup gate keeps them in gpu-runs/ as evidence) or a temp folder."""
    chosen = os.environ.get("IMAGE_GATE_RUNS")
    return REPO / chosen if chosen else tmp_path_factory.mktemp("image-gate-runs")


SEALED: list[Path] = []  # the campaign's run folders, named in the terminal summary


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name each run folder with its SHA256SUMS digest, so a gate record's stdout.log (which
    keeps only this output) binds the record to the very runs it judged."""
    terminalreporter.section("image gate runs")
    for run in SEALED:
        sums = run / "SHA256SUMS"
        digest = hashlib.sha256(sums.read_bytes()).hexdigest() if sums.is_file() else "unsealed"
        status = read_json(run / "run.json").get("status") if (run / "run.json").is_file() else "?"
        terminalreporter.write_line(f"{status}: {run} (SHA256SUMS sha256:{digest})")


@pytest.fixture(scope="session")
def gate_runs(upstream_site: Path, runs_dir: Path) -> dict[str, Any]:
    """`harness run campaigns/image-gates.yaml`, once: its exit, output and run folders."""
    proc = harness("run", str(CAMPAIGN), "--runs-dir", str(runs_dir), "--no-json-lines")
    if not runs_dir.is_dir() or not any(runs_dir.iterdir()):
        pytest.fail(f"harness run wrote no run folder (exit {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}", pytrace=False)
    runs = runs_by_control(runs_dir)
    SEALED.extend(runs.values())
    return {"proc": proc, "runs": runs}

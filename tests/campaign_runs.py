"""Running the harness as an operator would, and reading what it sealed: shared by the
tiers that run whole campaigns from the project root (tests/image_gates, tests/engine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HARNESS = [sys.executable, "-m", "harness"]


def harness(*args: str, timeout: float = 900, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*HARNESS, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def runs_by_control(runs_dir: Path) -> dict[str, Path]:
    """Each sealed run folder under `runs_dir`, by the name of the control it ran."""
    out = {}
    for folder in sorted(runs_dir.iterdir()):
        if (folder / "run.json").is_file():
            out[read_json(folder / "run.json")["control"]["name"]] = folder
    return out

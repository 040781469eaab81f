"""Running the harness as an operator would, and reading what it sealed: shared by the
tiers that run whole campaigns from the project root (tests/image_gates, tests/engine), and
a campaign file over the project's own controls for the tests that load one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HARNESS = [sys.executable, "-m", "harness"]


def repo_campaign(tmp_path: Path, controls: str, extra: str = "") -> Path:
    """tmp_path/campaigns/c.yaml: campaign `c` over the project's controls and images.lock,
    with `controls` (a YAML flow list) and `extra` YAML after them."""
    camp = tmp_path / "campaigns" / "c.yaml"
    camp.parent.mkdir(exist_ok=True)
    camp.write_text(textwrap.dedent(f"""\
        name: c
        row: ROW-1
        images_lock: {REPO / 'images.lock'}
        controls_dir: {REPO / 'controls'}
        controls: {controls}
        """) + textwrap.dedent(extra))
    return camp


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

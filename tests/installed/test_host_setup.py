"""docs/host-setup.md, run as written: every `sh` block, in order, in one shell.

The guide promises that each command in a `sh` block runs on any machine with Docker, with
`WHEEL` set to the wheel and `IMAGE` to a local image holding python3 (the rehearsal
image here). A block that stops working (a renamed option, a file init no longer writes,
a step that now exits 1) fails this test, so the guide cannot drift from the tool.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.installed.conftest import REPO, Dist, Installed

GUIDE = REPO / "docs" / "host-setup.md"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.S | re.M)
# The operator's git identity, which the guide asks them to set once.
IDENTITY = {"GIT_AUTHOR_NAME": "Operator", "GIT_AUTHOR_EMAIL": "operator@example.invalid",
            "GIT_COMMITTER_NAME": "Operator",
            "GIT_COMMITTER_EMAIL": "operator@example.invalid"}


def sh_blocks(text: str) -> list[str]:
    return [m.group(1) for m in BLOCK.finditer(text)]


def test_the_guide_has_its_steps_in_sh_blocks():
    blocks = sh_blocks(GUIDE.read_text())
    assert len(blocks) >= 10, blocks
    script = "\n".join(blocks)
    for step in ("harness init", "harness doctor", "harness images pin", "harness check",
                 "--dry-run", "harness run", "harness night", "harness gates",
                 "harness approve", "harness schedule", "harness bundle export",
                 "harness bundle verify"):
        assert step in script, f"docs/host-setup.md runs no `{step}` in a sh block"


def test_the_guide_runs_as_written(dist: Dist, installed: Installed, rehearsal_image: str,
                                   tmp_path: Path):
    script = "set -euo pipefail\nset -x\n" + "\n".join(sh_blocks(GUIDE.read_text()))
    env = installed.env | IDENTITY | {"WHEEL": str(dist.wheel),
                                      "IMAGE": "harness-rehearsal:local"}
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-6000:]}\n{r.stderr[-12000:]}"
    repo = tmp_path / "gpu-campaigns"
    assert sorted(p.name for p in (repo / "approvals").glob("*.json")), "no approval made"
    assert (tmp_path / "first-night.tar.gz").is_file()

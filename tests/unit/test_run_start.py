"""What `harness run` loads: the stages of a run, imported as any module is, and nothing
only a Slurm job or `harness images` uses.

Import checks run a fresh interpreter (this one has imported everything already)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Used only inside a Slurm job, or only by `harness images`: never by a run on this host.
ELSEWHERE = {"harness.measure.slurm.job", "harness.measure.images"}
# Every stage of a run, the seal included: imported when the run command is, so a module
# that fails to import fails the command at its start, never after a container ran.
STAGES = {"harness.pipeline.preflight", "harness.pipeline.launch", "harness.pipeline.post",
          "harness.pipeline.finish"}


def _fresh(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_run_command_loads_every_stage_and_nothing_only_others_use() -> None:
    loaded = set(_fresh("import json, sys\nimport harness.cli.core\n"
                        "print(json.dumps(sorted(sys.modules)))"))
    assert loaded >= STAGES and "docker" in loaded
    assert not ELSEWHERE & loaded
    assert "harness.pipeline.warm" not in loaded


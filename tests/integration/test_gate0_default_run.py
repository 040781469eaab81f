"""Gate 0's default contract end to end, in the real rehearsal container: a campaign that
names no contract is judged by the vLLM identity contract, so the in-process pair (whose
KV-cache size is set after the start-up observation) is accepted; `contract: all`
compares every field and refuses it for that size alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.config.fieldlist import VLLM_IDENTITY
from tests.conftest import REPO


def run_inproc(project, extra: str) -> tuple[dict, dict]:
    shutil.copytree(REPO / "controls" / "models", project.root / "controls" / "models",
                    dirs_exist_ok=True)
    shutil.copy(REPO / "controls" / "rehearsal-gate0-inproc.yaml", project.root / "controls")
    camp = project.campaign("g0", ["rehearsal-gate0-inproc"], extra=extra)
    before = set(project.run_dirs())
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode in (0, 1), r.stderr
    [run] = [p for p in project.run_dirs() if p not in before]
    verdict = json.loads((Path(run) / "post-steps/gate0/verdict.json").read_text())
    return project.record(run), verdict


def test_no_contract_is_the_vllm_identity_and_all_is_a_choice(project):
    rec, verdict = run_inproc(project, "")
    assert rec["status"] == "accepted", rec["reasons"]
    assert verdict["contract"] == list(VLLM_IDENTITY)
    assert verdict["compared"] == len(VLLM_IDENTITY) and verdict["differences"] == []
    rec, verdict = run_inproc(project, "contract: all\n")
    assert rec["status"] == "refused" and rec["rules"] == ["GATE0-FIELD-DIFFERS"]
    assert verdict["contract"] is None
    # the engine core's and its uni worker's (one config object, named once): sized after
    # start-up
    assert [(d["processes"], d["field"]) for d in verdict["differences"]] == [
        (["engine-core", "worker-0"], "cache.num_gpu_blocks")]

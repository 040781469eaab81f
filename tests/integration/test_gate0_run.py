"""Gate 0 end to end in the real rehearsal container: the seed's case refused, its pair
accepted, the transition recorded, and refinalize appending without rewriting."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.measure.runfolder.manifest import verify_folder
from tests.conftest import REPO

CONTRACT = ["compilation.custom_ops", "compilation.mode", "model.dtype",
            "cache.gpu_memory_utilization", "parallel.worker_extension_cls"]


def copy_controls(project) -> None:
    shutil.copytree(REPO / "controls" / "models", project.root / "controls" / "models")
    for name in ("rehearsal-gate0", "rehearsal-gate0-inproc"):
        shutil.copy(REPO / "controls" / f"{name}.yaml", project.root / "controls")


def run_campaign(project, controls: list[str]) -> list[Path]:
    copy_controls(project)
    camp = project.campaign("g0", controls, extra=f"contract: {json.dumps(CONTRACT)}\n")
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode in (0, 1), r.stderr
    return project.run_dirs()


def test_seed_case_refused_with_exactly_the_custom_ops_difference(project):
    [run] = run_campaign(project, ["rehearsal-gate0"])
    rec = project.record(run)
    assert rec["status"] == "refused" and rec["rules"] == ["GATE0-FIELD-DIFFERS"]
    # the engine core's and its uni worker's, once: the same process and config object
    assert [r["by"] for r in rec["reasons"]] == ["gate0"]
    [detail] = [r["detail"] for r in rec["reasons"]]
    assert detail.startswith("compilation.custom_ops differs (value-changed), in engine-core (")
    assert " and worker-0 (EngineCore, pid " in detail
    assert detail.endswith("), one configuration object")
    assert [(s["name"], s["result"], s.get("rules")) for s in rec["stages"]] == [
        ("preflight", "ok", None), ("launch", "ok", None),
        ("post", "refused", ["GATE0-FIELD-DIFFERS"])]
    verdict = json.loads((run / "post-steps/gate0/verdict.json").read_text())
    assert verdict["verdict"] == "refused"
    assert [(d["processes"], d["field"], d["kind"]) for d in verdict["differences"]] == [
        (["engine-core", "worker-0"], "compilation.custom_ops", "value-changed")]
    diff = verdict["differences"][0]
    assert diff["startup"] == ["+sparse_attn_indexer", "none"]
    assert diff["generation"] == ["+sparse_attn_indexer", "none", "+sparse_attn_indexer"]
    assert verdict["compared"] == len(CONTRACT)
    # both phases come from one process and name the same source as the run
    s = json.loads((run / "observations/startup.json").read_text())
    g = json.loads((run / "observations/generation.json").read_text())
    assert s["process"] == g["process"] and s["process"]["role"] == "EngineCore"
    assert s["source"]["seal"] == rec["seal"] and s["source"]["image"] == rec["image"]["id"]
    assert s["fields"]["compilation.mode"] == g["fields"]["compilation.mode"]
    assert g["fields"]["compilation.mode"]["$enum"].endswith("CompilationMode")


def test_transition_trace_names_the_second_post_init_on_the_same_list(project):
    [run] = run_campaign(project, ["rehearsal-gate0"])
    records = [json.loads(line) for line in
               (run / "observations/transitions.jsonl").read_text().splitlines()]
    appends = [r for r in records if r["event"] == "change"
               and r.get("field") == "compilation.custom_ops"
               and r["after"] == ["+sparse_attn_indexer", "none", "+sparse_attn_indexer"]]
    assert appends, "the duplicate append was traced"
    late = appends[0]
    assert late["process"] == "EngineCore"
    assert any("__post_init__" in frame for frame in late["stack"])
    assert any("core.py" in frame for frame in late["stack"]), late["stack"]
    hooks = [r for r in records if r["event"] == "enter" and r["pid"] == late["pid"]
             and r["hook"] == "VllmConfig.__post_init__"]
    assert hooks and hooks[-1]["config_id"] == late["config_id"]


def test_paired_control_in_process_is_accepted(project):
    [run] = run_campaign(project, ["rehearsal-gate0-inproc"])
    rec = project.record(run)
    assert rec["status"] == "accepted", rec["reasons"]
    verdict = json.loads((run / "post-steps/gate0/verdict.json").read_text())
    assert verdict["differences"] == []


def test_refinalize_appends_a_verdict_and_the_run_stays_refused(project):
    [run] = run_campaign(project, ["rehearsal-gate0"])
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    r = project.harness("refinalize", str(run), "--json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["verdict"] == "refused"
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert all(after[p] == b for p, b in before.items()), "nothing was rewritten"
    added = sorted(str(p.relative_to(run)) for p in set(after) - set(before))
    assert added and all(a.startswith("addenda/") for a in added), added
    assert verify_folder(run) == []
    assert project.record(run)["status"] == "refused"
    assert project.harness("verify", str(run)).returncode == 0

"""`harness diff` and `harness rerun` after a fix, against the real engine: the seed's case
refused, its paired in-process control accepted, the diff naming the field and the status
change; a rerun from the current checkout saying whether the seal changed; `rerun --failed`
over a night; the original folder byte-identical and verifying through all of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.nightfolder.rows import chain_of
from harness.measure.runfolder.manifest import verify_folder
from harness.measure.runfolder.reruns import reruns_of
from tests.conftest import REPO

CONTRACT = ["compilation.custom_ops", "compilation.mode", "model.dtype",
            "cache.gpu_memory_utilization", "parallel.worker_extension_cls"]
GATE0, INPROC = "rehearsal-gate0", "rehearsal-gate0-inproc"
FIX = 'env:\n  VLLM_ENABLE_V1_MULTIPROCESSING: "0"\n'  # the fix: what the paired control does


def setup(project, controls: list[str]) -> Path:
    shutil.copytree(REPO / "controls" / "models", project.root / "controls" / "models")
    for name in (GATE0, INPROC):
        shutil.copy(REPO / "controls" / f"{name}.yaml", project.root / "controls")
    return project.campaign("g0", controls, extra=f"contract: {json.dumps(CONTRACT)}\n")


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file()}


def by_control(project) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for p in project.run_dirs():
        if not (p / "run.json").is_file():  # the nights folder
            continue
        out.setdefault(project.record(p)["control"]["name"], []).append(p)
    return out


def test_diff_names_custom_ops_and_the_status_change(project):
    camp = setup(project, [GATE0, INPROC])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    runs = by_control(project)
    [refused], [accepted] = runs[GATE0], runs[INPROC]
    before = snapshot(refused), snapshot(accepted)
    d = project.harness("diff", str(refused), str(accepted), "--json")
    assert d.returncode == 0, d.stderr
    doc = json.loads(d.stdout)
    assert doc["schema"] == "harness.diff/v4"
    # one campaign: one seal; the two controls differ in their YAML, the env var of the fix
    # and the control label, and their figures (durations, memory) may differ
    assert [t for t in doc["differs"] if t != "figures"] == ["status", "rules", "inputs",
                                                             "docker", "env", "gate0"], \
        doc["differs"]
    t = doc["topics"]
    assert t["env"]["added"] == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert t["env"]["removed"] == t["env"]["changed"] == {}
    assert (t["docker"]["removed"], t["docker"]["added"]) == (
        [f"--label org.harness.control={GATE0}"], [f"--label org.harness.control={INPROC}"])
    control = t["inputs"]["files"]["control"]
    assert control["same"] is False and t["inputs"]["files"]["campaign"]["same"] is True
    assert {"+env:", '+  VLLM_ENABLE_V1_MULTIPROCESSING: "0"', f"-name: {GATE0}",
            f"+name: {INPROC}"} <= set(control["hunk"])
    assert (t["status"]["a"], t["status"]["b"]) == ("refused", "accepted")
    assert t["rules"]["only_a"] == ["GATE0-FIELD-DIFFERS"]
    assert t["seal"]["same"] and t["seal"]["files"] == {"added": [], "removed": [],
                                                         "changed": []}
    # named by process: the engine core's, once, though its uni worker holds the same
    # config object (the verdict lists one difference naming both)
    [field] = t["gate0"]["fields"]
    assert [field["field"]] == t["gate0"]["only_a"] == ["engine-core: compilation.custom_ops"]
    assert field["a"]["generation"] == ["+sparse_attn_indexer", "none", "+sparse_attn_indexer"]
    assert field["b"]["startup"] == field["b"]["generation"] == ["+sparse_attn_indexer", "none"]
    assert t["image"]["same"] and t["model"]["same"] and t["engine"]["same"]
    text = project.harness("diff", str(refused), str(accepted))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "status: refused -> accepted" in lines
    assert "    + --env VLLM_ENABLE_V1_MULTIPROCESSING=0" in lines
    assert '    +  VLLM_ENABLE_V1_MULTIPROCESSING: "0"' in lines  # the control's hunk
    assert "    --- a/inputs/control.yaml" in lines and "    +++ b/inputs/control.yaml" in lines
    # the outcome first: Gate 0's values right after the rules, above the long YAML hunk
    assert lines[2] in ("differs: status, rules, gate0, inputs, env, docker",
                        "differs: figures, status, rules, gate0, inputs, env, docker"), lines
    gate0 = lines.index("gate0 verdict: refused -> accepted")
    assert lines.index("rules: [\"GATE0-FIELD-DIFFERS\"] -> []") == gate0 - 1
    assert lines[gate0 + 1] == "    engine-core: compilation.custom_ops: differs in a only"
    assert gate0 < lines.index("inputs: control.yaml differs, campaign.yaml same")
    assert (snapshot(refused), snapshot(accepted)) == before  # diff writes nothing
    shown = project.harness("show", str(refused))
    assert "attempt" in shown.stdout and "Gate 0 differences:" in shown.stdout
    assert "compilation.custom_ops (value-changed)" in shown.stdout


def test_rerun_from_the_checkout_says_whether_the_seal_changed(project):
    camp = setup(project, [GATE0])
    assert project.harness("run", str(camp), "--runs-dir", str(project.runs)).returncode == 1
    [orig] = project.run_dirs()
    before = snapshot(orig)

    plain = project.harness("rerun", str(orig), "--reason", "plain repeat")
    assert plain.returncode == 1, plain.stderr  # still refused: nothing was fixed
    assert "plain repeat: seal unchanged" in plain.stdout, plain.stdout
    assert f"uses: {camp}" in plain.stdout

    control = project.root / "controls" / f"{GATE0}.yaml"
    control.write_text(control.read_text() + FIX)
    fixed = project.harness("rerun", str(orig), "--reason", "in-process engine core")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"seal changed: 1 file\n  changed input/controls/{GATE0}.yaml\n" in fixed.stdout, \
        fixed.stdout
    new = Path(fixed.stdout.split("accepted: ", 1)[1].splitlines()[0])
    rec = project.record(new)
    assert rec["status"] == "accepted" and rec["attempt"] == 2
    assert rec["rerun_of"]["run_id"] == orig.name
    assert [link["run_id"] for link in reruns_of(orig)][-1] == new.name

    d = json.loads(project.harness("diff", str(orig), str(new), "--json").stdout)
    assert d["topics"]["seal"]["files"]["changed"] == [f"input/controls/{GATE0}.yaml"]
    assert d["topics"]["gate0"]["only_a"] == ["engine-core: compilation.custom_ops"]
    assert (d["topics"]["status"]["a"], d["topics"]["status"]["b"]) == ("refused", "accepted")
    said = project.harness("diff", str(orig), str(new)).stdout.splitlines()
    assert any(x.startswith("seal: sha256:") and x.endswith(" (1 file)") for x in said), said
    assert f"    changed input/controls/{GATE0}.yaml" in said
    # the original is untouched: byte-identical, verifies, still refused
    assert snapshot(orig) == before and verify_folder(orig) == []
    assert project.harness("verify", str(orig)).returncode == 0
    assert project.record(orig)["status"] == "refused"


def test_rerun_failed_reruns_a_nights_failures_and_rewrites_its_summary(project):
    camp = setup(project, [GATE0, INPROC])
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [night] = sorted((project.runs / "nights").iterdir())
    [orig] = by_control(project)[GATE0]
    before = snapshot(orig)
    control = project.root / "controls" / f"{GATE0}.yaml"
    control.write_text(control.read_text() + FIX)

    rr = project.harness("rerun", "--failed", str(night), "--reason", "fixed the control")
    assert rr.returncode == 0, rr.stdout + rr.stderr
    assert rr.stdout.count("rerun of: ") == 1 and f"rerun of: {orig}" in rr.stdout
    # it ends as the night did, once: the headline per control and what to read next
    [headline] = [line for line in rr.stdout.splitlines() if line.startswith("controls: ")]
    assert "controls accepted (1 after rerun) · regressions: not judged: " in headline, rr.stdout
    assert rr.stdout.count(f"next: harness report {night}") == 1, rr.stdout
    [new] = [p for p in by_control(project)[GATE0] if p != orig]
    assert project.record(new)["rerun_of"]["run_id"] == orig.name
    with Journal.open(night / JOURNAL_NAME, readonly=True) as j:
        chain = [(c.run_id, c.state, c.origin) for c in chain_of(j.rows(), orig.name)]
    assert chain == [(orig.name, "refused", "plan"), (new.name, "accepted", "rerun")]
    summary = json.loads((night / "summary.json").read_text())
    entries = {e["run_id"]: e for e in summary["runs"]}
    assert entries[orig.name]["reruns"] == [new.name]
    assert new.name in (night / "summary.md").read_text()
    assert snapshot(orig) == before and verify_folder(orig) == []

    again = project.harness("rerun", "--failed", str(night), "--reason", "again")
    assert again.returncode == 0 and "nothing to rerun" in again.stdout


def test_a_rerun_through_a_symlink_lands_beside_the_real_run_not_the_link(project, tmp_path):
    """`latest -> runs/<id>` is a convenience, not a place: the rerun, its link in
    reruns.jsonl and its journal row belong to the real runs folder."""
    camp = setup(project, [INPROC])
    assert project.harness("run", str(camp), "--runs-dir", str(project.runs)).returncode == 0
    [orig] = project.run_dirs()
    elsewhere = tmp_path / "shortcuts"
    elsewhere.mkdir()
    (elsewhere / "latest").symlink_to(orig)
    r = project.harness("rerun", str(elsewhere / "latest"), "--reason", "again")
    assert r.returncode == 0, r.stdout + r.stderr
    assert list(elsewhere.iterdir()) == [elsewhere / "latest"]  # nothing written beside it
    new = Path(r.stdout.split("accepted: ", 1)[1].splitlines()[0])
    assert new.parent == orig.parent and project.record(new)["rerun_of"]["run_id"] == orig.name
    assert [link["run_id"] for link in reruns_of(orig)] == [new.name]

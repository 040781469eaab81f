"""Regressions called in a real night, on the real engine: a baseline night of a trivial
control, a night where its figure is worse by a large step (called, rerun, confirmed: the
morning summary lists it with both runs), and a night with one bad run whose rerun is
normal (a one-off: no alert). The figure is the model-load memory the workload prints in
vLLM's words (harness.measure.metrics reads it from the log), never a time: a time moves
with the machine's load, and a test must not. The step comes from outside the sealed
inputs, a value in a read-write mount the workload reads: the seal and every other input
are the same, and `harness diff` names that mount as what changed (the bad run found its
one-off step there, its rerun did not), never a plain repeat; `harness verify` passes, and
a changed byte in the addendum fails it. The confirmed regression is in every summary: the
night's end lines, `report` in each format, `status` and the hook's headline; a night whose
runs had too few earlier ones says "not judged", never "none".
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.conftest import containers_with_label

BASELINE = 19  # a run alone is called only against 19 earlier ones (p = 1/20 <= 0.05)
FIGURE = "model_load_gib"  # Worse.HIGHER: the weights took more memory
CONTROL = """\
command: [python3, -c, "import os; o = '/state/slow-once'; x = float(open(o).read()) \
if os.path.exists(o) else 0.0; os.path.exists(o) and os.remove(o); \
print('Model loading took %.2f GiB memory and 0.5 seconds' \
% (1.0 + float(open('/state/delay').read()) + x), flush=True)"]
mounts:
  - {source: ../state, target: /state, read_only: false}
timeout: 1m
"""
KEEP = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_bytes(sys.stdin.buffer.read())"


def nights(project) -> list[Path]:
    return sorted((project.runs / "nights").iterdir())


def night(project, camp: Path) -> tuple[Path, dict, str]:
    """The night's folder, its summary.json and its stdout (the end lines)."""
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr  # a call never changes the exit code
    assert "Traceback" not in r.stderr and "regression-failed" not in r.stderr, r.stderr
    latest = nights(project)[-1]
    summary = json.loads((latest / "summary.json").read_text())
    assert f"controls: {summary['headline']}" in r.stdout.splitlines(), r.stdout
    calls = [json.loads(line) for line in r.stderr.splitlines() if '"regression-call"' in line]
    return latest, summary, calls


def every_surface(project, night_dir: Path) -> dict[str, str]:
    """What `report` (each format) and `status` print of the night."""
    out = {}
    for fmt in ("table", "md", "html", "json"):
        r = project.harness("report", str(night_dir), "--format", fmt)
        assert r.returncode == 0, r.stderr
        out[fmt] = r.stdout
    st = project.harness("status", "--runs-dir", str(project.runs), "--lock", str(project.lock))
    out["status"] = st.stdout
    return out


def addendum(run_dir: Path) -> dict:
    [folder] = (run_dir / "addenda").iterdir()
    return json.loads((folder / "regression.json").read_text())


def test_a_step_is_confirmed_and_a_one_off_is_not(project, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    state = project.root / "state"
    state.mkdir()
    state.chmod(0o777)
    delay = state / "delay"
    delay.write_text("0")
    delay.chmod(0o666)
    project.control("steady", CONTROL)
    camp = project.campaign("regcamp", [{"control": "steady", "repeat": BASELINE}])

    _, first, calls = night(project, camp)  # the baseline: no call can be a regression yet
    assert first["regressions"] == first["unconfirmed"] == []
    # run k is called against the k-1 before it: a call needs 9, so the first 9 judge nothing
    assert [c["regressions"] for c in calls[:9]] == [
        f"not judged: {k} of 9 earlier runs" for k in range(9)]
    assert first["headline"] == (f"{BASELINE}/{BASELINE} controls accepted · no regression in "
                                 f"{BASELINE - 9} controls judged; not judged: 9 controls with "
                                 "0–8 of 9 earlier runs")
    assert len(first["runs"]) == BASELINE and {e["origin"] for e in first["runs"]} == {"plan"}

    payload = project.root / "payload.json"
    project.campaign("regcamp", ["steady"], f"""\
        hook:
          command: [{sys.executable}, -c, "{KEEP}", {payload}]
        """)  # one run a night from now on, and a hook told of each
    delay.write_text("1.5")  # the step: every run from tonight on takes 1.5 GiB more
    step_dir, step, _ = night(project, camp)
    original, rerun = (Path(e["path"]) for e in step["runs"])
    assert project.record(rerun)["rerun_of"]["run_id"] == original.name
    figures = {r["figure"]: r for r in step["regressions"]}
    assert FIGURE in figures, step
    called = figures[FIGURE]
    assert (called["run_id"], called["rerun_id"]) == (original.name, rerun.name)
    assert called["shift"] > 1.0 and called["p_value"] < 0.01
    assert called["baseline"] == BASELINE and called["recent"] == 2
    assert f"confirmed by its rerun {rerun.name}" in (step_dir / "summary.md").read_text()
    alone = addendum(original)
    assert alone["figures"][FIGURE]["p_value"] <= 0.05
    assert len(alone["baseline"]) == BASELINE and alone["rerun"]["scheduled"] is True
    # one line says it on every surface: the rerun confirmed, nothing failed
    said = f"steady {FIGURE} +150 % (p=0.005)"
    # (a time can move too, on a loaded machine: then it is named beside the figure)
    assert re.match(r"1/1 control accepted \(1 rerun to confirm\) · [1-3] regressions? "
                    "confirmed: ", step["headline"]), step["headline"]
    assert said in step["headline"] and step["verdict"]["confirmed"] >= 1
    surfaces = every_surface(project, step_dir)
    for name, text in surfaces.items():
        words = said.replace("_", "\\_") if name == "md" else said  # Markdown escapes _
        assert "confirmed: " in text and words in text, (name, text)
        assert "after rerun" not in text, (name, text)
    assert json.loads(surfaces["json"])["verdict"]["not_judged"] == []
    assert f"  summary: {step['headline']}" in surfaces["status"].splitlines()
    sent = json.loads(payload.read_bytes())
    assert sent["headline"] == step["headline"]
    assert [r["figure"] for r in sent["regressions"]] == [r["figure"] for r in step["regressions"]]

    delay.write_text("0")
    once = state / "slow-once"
    once.write_text("4")  # one bad run, worse than the step's: its rerun is normal
    once.chmod(0o666)
    one_off_dir, one_off, _ = night(project, camp)
    assert "· no regression confirmed (" in one_off["headline"], one_off["headline"]
    slow, normal = (Path(e["path"]) for e in one_off["runs"])
    assert not once.exists(), "the slow run consumed its delay"
    assert [r for r in one_off["regressions"] if r["figure"] == FIGURE] == []
    [unconfirmed] = [u for u in one_off["unconfirmed"] if u["figure"] == FIGURE]
    assert (unconfirmed["run_id"], unconfirmed["rerun_id"]) == (slow.name, normal.name)
    assert addendum(normal)["confirms"]["figures"][FIGURE]["confirmation"] == (
        "unconfirmed")
    md = (one_off_dir / "summary.md").read_text()
    assert "did not confirm it" in md and "no alert" in md and "REGRESSION" not in md

    diff = project.harness("diff", str(slow), str(normal))
    assert diff.returncode == 0, diff.stderr
    lines = diff.stdout.splitlines()
    assert "differs: figures, mounts" in lines, diff.stdout  # the one-off step: figures first
    assert f"    {FIGURE} 5.00 GiB -> 1.00 GiB (-80 %, better)" in lines, diff.stdout
    assert any(line.startswith("seal: same") for line in lines), diff.stdout
    assert "not a repeat: mounts (/state) changed" in lines, diff.stdout
    assert "plain repeat" not in diff.stdout
    for folder in (step_dir, one_off_dir):
        v = project.harness("verify", str(folder))
        assert v.returncode == 0, v.stdout + v.stderr
    [folder] = (slow / "addenda").iterdir()
    target = folder / "regression.json"
    folder.chmod(0o755)
    target.chmod(0o644)
    target.write_bytes(target.read_bytes().replace(b"regression", b"regressioN", 1))
    bad = project.harness("verify", str(slow))
    assert bad.returncode == 1 and "regression.json" in bad.stdout + bad.stderr
    assert containers_with_label(f"org.harness.lock={project.lock}") == []

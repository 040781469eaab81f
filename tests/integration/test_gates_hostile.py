"""Red team of `harness gates` end to end: hostile gates that write into the gate record
folder, plant names there, escape through cwd, or change the project."""

from __future__ import annotations

import json
import os
import sys

import pytest

from harness.base.catalogue import GATES_TAMPERED
from harness.judge.gaterecord.gatesjson import load
from tests.integration.test_gates_cli import harness, make_project, records

PY = sys.executable
# finds its own record folder from HARNESS_GATE_DIR (<runs>/gates/.gate-X/<name>)
FIND = ("import os, pathlib; d = pathlib.Path(os.environ['HARNESS_GATE_DIR']); "
        "[rec] = [p for p in d.parent.parent.iterdir() if not p.name.startswith('.')]; ")


def gate(name: str, code: str, extra: str = "") -> str:
    return (f"  - name: {name}\n    run: {json.dumps([PY, '-c', FIND + code])}\n"
            f"    timeout: 60\n{extra}")


@pytest.mark.parametrize("code", [
    "(rec / 'forged.txt').write_text('x')",  # a stray file beside gates.json
    "(rec / 'unit' / 'extra.log').write_text('x')",  # into its own record folder
    "os.mkfifo(rec / 'unit' / 'pipe')",  # something no seal holds
    "(rec / 'addenda').mkdir()",  # a folder of a name the record reserves
])
def test_a_gate_writing_into_its_record_folder_leaves_it_unsealed(tmp_path, code):
    campaign = make_project(tmp_path, gate("unit", code))
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 1, r.stdout + r.stderr
    assert GATES_TAMPERED in r.stdout + r.stderr and "Traceback" not in r.stderr
    [folder] = records(tmp_path)
    assert not (folder / "SHA256SUMS").exists()
    assert harness(tmp_path, "verify", str(folder)).returncode != 0


def test_a_gate_planting_junit_xml_in_the_record_cannot_write_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    code = (f"(rec / 'unit' / 'junit.xml').symlink_to({str(victim)!r}); "
            "(d / 'junit.xml').write_text('<testsuite><testcase name=\"a\"/></testsuite>')")
    campaign = make_project(tmp_path, gate("unit", code, "    expect: {junit: junit.xml}\n"))
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert victim.read_text() == "precious\n"
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr


def test_honest_gates_still_seal_a_record(tmp_path):
    campaign = make_project(tmp_path, gate("unit", "print('ok')"))
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 0, r.stdout + r.stderr
    [folder] = records(tmp_path)
    assert load(folder)["passed"] is True


@pytest.mark.parametrize("cwd", ["..", "link-out", "sub/../../x"])
def test_a_gate_cwd_outside_the_project_is_invalid_input(tmp_path, cwd):
    root = tmp_path / "p"
    root.mkdir()
    os.symlink(tmp_path, root / "link-out")
    campaign = make_project(root, gate("unit", "print(1)", f"    cwd: {cwd}\n"))
    r = harness(root, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert not (root / "runs" / "gates").exists() or not records(root)


def test_a_gate_changing_a_sealed_file_is_caught(tmp_path):
    code = "pathlib.Path('images.lock').write_text(pathlib.Path('images.lock').read_text()+'#\\n')"
    campaign = make_project(tmp_path, gate("unit", code))
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 1 and "GATES-SEAL-CHANGED" in r.stdout + r.stderr, r.stderr


def test_a_gate_never_sees_the_reviewers_ssh_agent(tmp_path):
    """A gate is code under test: with the operator's agent socket it could sign a forged
    approval (`ssh-keygen -Y sign` uses the agent for a key it holds)."""
    import subprocess

    code = "import os; print('agent=' + repr(os.environ.get('SSH_AUTH_SOCK')))"
    campaign = make_project(tmp_path, f"  - name: unit\n    run: {json.dumps([PY, '-c', code])}"
                                      "\n    timeout: 60\n")
    env = {**os.environ, "SSH_AUTH_SOCK": str(tmp_path / "agent.sock")}
    r = subprocess.run([PY, "-m", "harness", "gates", str(campaign), "--runs-dir", "runs"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    [folder] = records(tmp_path)
    assert (folder / "unit" / "stdout.log").read_text() == "agent=None\n"


def test_a_process_outliving_its_gate_fails_it_and_never_writes_after_the_grace(
        tmp_path, monkeypatch):
    """A gate that leaves a process holding its stdout (setsid: out of reach of the kill):
    the gate fails, and what that process prints later never reaches the log, which may
    be sealed by then (a write after the seal would break the record)."""
    import time

    from harness.config.gatelist import Gate
    from harness.judge.gaterecord.onegate import judge
    from harness.probe import gaterun as gates_run

    monkeypatch.setattr(gates_run, "GRACE_S", 0.5)
    late = "import time; time.sleep(2); print('late', flush=True)"
    code = (f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {late!r}], "
            "start_new_session=True); print('early', flush=True)")
    gate = Gate(name="unit", run=[PY, "-c", code], timeout=30)
    scratch, out_dir = tmp_path / "scratch", tmp_path / "unit"
    scratch.mkdir()
    out_dir.mkdir()
    out = gates_run._execute(gate, tmp_path, scratch, out_dir)
    verdict = judge(gate, out)
    assert out.exit_code == 0 and out.lingering and not verdict.passed
    assert "outlived it" in verdict.why
    time.sleep(3)
    assert (out_dir / "stdout.log").read_text() == "early\n"

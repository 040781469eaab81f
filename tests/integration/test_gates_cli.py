"""`harness gates` end to end on a temporary project: sealed records, exit codes, `verify`,
`show`, and the reader an approval uses (`load` refuses a tampered record, `digest`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.base.catalogue import GATES_NOT_INTACT
from harness.base.errors import Refused
from harness.judge.gaterecord.gatesjson import GATE_RECORD, digest, load

PY = sys.executable
JUNIT = ("import sys; open(sys.argv[1], 'w').write('<testsuite><testcase name=\"a\"/>"
         "<testcase name=\"b\"/></testsuite>')")
UNIT = [PY, "-c", JUNIT, "{gate_dir}/junit.xml"]
MUTATION = [PY, "-c", 'print("mutation: killed 96/100 = 96.0% (x)")']
GOOD = f"""\
  - name: unit
    run: {json.dumps(UNIT)}
    timeout: 60
    expect: {{junit: junit.xml, min_tests: 2}}
  - name: mutation
    run: {json.dumps(MUTATION)}
    timeout: 60
    expect: {{min_kill_score: 95}}
"""
BAD = f"""\
  - name: failing
    run: {json.dumps([PY, "-c", 'import sys; print("boom"); sys.exit(3)'])}
    timeout: 60
"""


def make_project(root: Path, gates: str) -> Path:
    for d in ("campaigns", "controls"):
        (root / d).mkdir(exist_ok=True)
    (root / "images.lock").write_text(
        "images:\n  rehearsal:\n    id: sha256:" + "0" * 64 + "\n    ref: x:local\n")
    (root / "controls" / "c.yaml").write_text(
        "name: c\nimage: rehearsal\ndevice: cpu\ncommand: [/bin/true]\ntimeout: 60\n")
    campaign = root / "campaigns" / "t.yaml"
    campaign.write_text(f"name: t\nrow: TEST\ncontrols: [c]\ngates:\n{gates}")
    return campaign


def harness(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=120, cwd=root)


def records(root: Path) -> list[Path]:
    return sorted((root / "runs" / "gates").iterdir())


def test_passing_gates_seal_a_record_that_verifies_and_shows(tmp_path):
    campaign = make_project(tmp_path, GOOD)
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passed: unit" in r.stdout and "passed: mutation" in r.stdout
    [folder] = records(tmp_path)
    assert folder.name.startswith("t-")
    doc = load(folder)
    assert doc["passed"] is True
    assert doc["gates"][0]["counts"] == {"tests": 2, "failures": 0, "errors": 0, "skipped": 0}
    assert doc["gates"][1]["kill_score"] == 96.0
    assert doc["source_seal"].startswith("sha256:") and "commit" in doc["git"]
    assert (folder / "unit" / "junit.xml").is_file()
    assert "96/100" in (folder / "mutation" / "stdout.log").read_text()
    assert harness(tmp_path, "verify", str(folder)).returncode == 0
    shown = harness(tmp_path, "show", str(folder))
    assert shown.returncode == 0 and "PASS unit" in shown.stdout, shown.stderr
    assert "folder seal intact" in shown.stdout
    as_json = harness(tmp_path, "show", "--json", str(folder))
    assert json.loads(as_json.stdout) == doc
    assert digest(folder).startswith("sha256:") and digest(folder) == digest(folder)


def test_a_failing_gate_exits_one_and_says_why(tmp_path):
    campaign = make_project(tmp_path, GOOD + BAD)
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED: failing" in r.stdout and "exited 3, expected 0" in r.stdout
    [folder] = records(tmp_path)
    doc = load(folder)
    assert doc["passed"] is False
    assert [g["passed"] for g in doc["gates"]] == [True, True, False]
    assert "boom" in (folder / "failing" / "stdout.log").read_text()
    assert harness(tmp_path, "verify", str(folder)).returncode == 0
    assert "FAIL failing" in harness(tmp_path, "show", str(folder)).stdout


def test_only_runs_the_named_gates(tmp_path):
    campaign = make_project(tmp_path, GOOD + BAD)
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs", "--only", "mutation")
    assert r.returncode == 0, r.stdout + r.stderr
    [folder] = records(tmp_path)
    assert [g["name"] for g in load(folder)["gates"]] == ["mutation"]
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs", "--only", "nope")
    assert r.returncode == 2 and "no such gate" in r.stderr


def test_a_command_not_found_exits_three_and_is_recorded(tmp_path):
    campaign = make_project(tmp_path, "  - name: missing\n    run: [no-such-tool-xyz]\n"
                                      "    timeout: 60\n")
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 3, r.stdout + r.stderr
    [folder] = records(tmp_path)
    assert load(folder)["gates"][0]["why"].startswith("could not start: no-such-tool-xyz")


def test_a_junit_symlink_is_not_followed_and_the_record_still_seals(tmp_path):
    link = [PY, "-c", "import os, sys; os.symlink('/etc/passwd', sys.argv[1])",
            "{gate_dir}/junit.xml"]
    campaign = make_project(tmp_path, f"  - name: sly\n    run: {json.dumps(link)}\n"
                                      "    timeout: 60\n    expect: {junit: junit.xml}\n")
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 1, r.stdout + r.stderr
    [folder] = records(tmp_path)
    assert "not a readable regular file" in load(folder)["gates"][0]["why"]
    assert not (folder / "sly" / "junit.xml").exists()


def _writable(folder: Path) -> None:
    for d, _, files in os.walk(folder):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)


def test_load_refuses_a_tampered_record_and_digest_follows_the_seal(tmp_path):
    campaign = make_project(tmp_path, GOOD)
    assert harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs").returncode == 0
    [folder] = records(tmp_path)
    before = digest(folder)
    _writable(folder)
    log = folder / "mutation" / "stdout.log"
    log.write_text(log.read_text().replace("96/100", "99/100"))
    with pytest.raises(Refused) as e:
        load(folder)
    assert e.value.rule == GATES_NOT_INTACT and "mutation/stdout.log: changed" in e.value.message
    assert harness(tmp_path, "verify", str(folder)).returncode == 1
    assert "NOT INTACT" in harness(tmp_path, "show", str(folder)).stdout
    sums = folder / "SHA256SUMS"
    data = bytearray(sums.read_bytes())
    data[0] = ord("0") if data[0] != ord("0") else ord("1")
    sums.write_bytes(bytes(data))
    assert digest(folder) != before
    (folder / GATE_RECORD).write_text("{}")
    with pytest.raises(Refused):
        load(folder)


def test_check_names_gate_faults_with_positions(tmp_path):
    campaign = make_project(tmp_path, "  - name: g\n    run: make test\n    timeout: 60\n")
    r = harness(tmp_path, "check", str(campaign))
    assert r.returncode == 2
    assert f"{campaign}:6:10:" in r.stderr and "never a shell string" in r.stderr


def test_gates_file_is_checked_and_sealed(tmp_path):
    campaign = make_project(tmp_path, "")
    campaign.write_text(campaign.read_text().replace("gates:\n", "gates_file: gates.yaml\n"))
    gates_file = tmp_path / "campaigns" / "gates.yaml"
    gates_file.write_text(textwrap.dedent("""\
        gates:
          - name: ok
            run: [/bin/true]
            timeout: 1h
            expect: {exit_code: 7}
        """))
    r = harness(tmp_path, "check", str(campaign), str(gates_file))
    assert r.returncode == 0, r.stderr
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 1 and "exited 0, expected 7" in r.stdout
    gates_file.write_text("gates:\n  - name: ok\n    run: [/bin/true]\n")
    r = harness(tmp_path, "check", str(campaign))
    assert r.returncode == 2 and f"{gates_file}:2:5:" in r.stderr and "timeout" in r.stderr


def test_a_gate_past_its_timeout_is_killed_and_fails(tmp_path):
    slow = [PY, "-c", "import time; time.sleep(60)"]
    campaign = make_project(tmp_path, f"  - name: slow\n    run: {json.dumps(slow)}\n"
                                      "    timeout: 1\n")
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 1, r.stdout + r.stderr
    [folder] = records(tmp_path)
    gate = load(folder)["gates"][0]
    assert gate["why"] == "ran past its 1 s timeout and was killed" and gate["exit_code"] is None
    assert gate["duration_s"] < 30


def test_an_interrupt_kills_the_gate_and_seals_what_ran(tmp_path):
    slow = [PY, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    campaign = make_project(tmp_path, GOOD + f"  - name: slow\n    run: {json.dumps(slow)}\n"
                                             "    timeout: 120\n" + BAD)
    proc = subprocess.Popen([PY, "-m", "harness", "gates", str(campaign), "--runs-dir", "runs"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for _ in range(300):
        logs = list((tmp_path / "runs" / "gates").glob("*/slow/stdout.log"))
        if logs and "started" in logs[0].read_text():
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr  # what every Ctrl-C'd command exits
    [folder] = records(tmp_path)
    doc = load(folder)
    assert [g["name"] for g in doc["gates"]] == ["unit", "mutation", "slow"]  # not `failing`
    assert doc["gates"][2]["why"].startswith("interrupted") and doc["passed"] is False


def test_a_gate_that_changes_the_sealed_bytes_is_refused(tmp_path):
    edit = [PY, "-c", "open('campaigns/t.yaml', 'a').write('# changed\\n')"]
    campaign = make_project(tmp_path, f"  - name: edit\n    run: {json.dumps(edit)}\n"
                                      "    timeout: 60\n")
    r = harness(tmp_path, "gates", str(campaign), "--runs-dir", "runs")
    assert r.returncode == 1 and "REFUSED GATES-SEAL-CHANGED" in r.stdout, r.stdout + r.stderr
    [folder] = records(tmp_path)
    doc = load(folder)  # sealed with its whole verdict: the gate passed, the record did not
    assert doc["passed"] is False and doc["gates"][0]["passed"] is True
    assert [x["rule"] for x in doc["refusals"]] == ["GATES-SEAL-CHANGED"]

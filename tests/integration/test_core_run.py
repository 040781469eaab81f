"""The core pipeline against the real Docker engine: lock, witness, logs, seal, refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from harness.base.timeutil import parse
from harness.measure.lock import is_free
from tests.conftest import containers_with_label

SLEEPER = """\
command: [python3, -c, "import time,sys; print('start', flush=True); time.sleep({s}); print('end')"]
timeout: 2m
"""


def test_accepted_run_leaves_a_sealed_verifiable_folder(project):
    project.control("hello", """\
        command:
          - python3
          - -c
          - import sys, time; print('out'); print('err', file=sys.stderr); time.sleep(1)
        env: {API_TOKEN: do-not-store-me}
        """)
    camp = project.campaign("camp", ["hello"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "accepted" and rec["image"]["id"] == project.image_id
    assert [(s["name"], s["result"]) for s in rec["stages"]] == [
        ("preflight", "ok"), ("launch", "ok"), ("post", "ok")]
    assert (run / "logs/stdout.log").read_text() == "out\n"
    assert (run / "logs/stderr.log").read_text() == "err\n"
    argv = json.loads((run / "docker-vector.json").read_text())["argv"]
    assert argv[:3] == ["docker", "run", "--pull=never"] and project.image_id in argv
    wit = json.loads((run / "launcher-witness.json").read_text())
    assert wit["argv"] == argv and wit["boot_id"] and wit["create_time"] > 0
    assert wit["exec"]["confirmed"] is True  # read after the exec, as the run's verdict needs
    insp = json.loads((run / "container-inspect.json").read_text())
    assert insp["init_pid"] and insp["init_pid"] > 0, insp.get("note")
    assert insp["inspect"]["Image"] == project.image_id
    assert insp["cgroup"], "the container's cgroup is recorded"
    lock = rec["lock"]
    assert parse(lock["acquired"]) <= parse(lock["released"])
    # secrets never in clear anywhere in the folder
    for p in run.rglob("*"):
        if p.is_file():
            assert b"do-not-store-me" not in p.read_bytes(), p
    r = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=run,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    assert project.harness("verify", str(run)).returncode == 0
    assert all(not os.access(p, os.W_OK) or os.geteuid() == 0 for p in run.rglob("*"))
    assert all((p.stat().st_mode & 0o222) == 0 for p in run.rglob("*"))
    # nothing left behind in the engine
    assert containers_with_label(f"org.harness.run-id={rec['run_id']}") == []


def test_nonzero_exit_is_failed_and_still_sealed(project):
    project.control("boom", 'command: [python3, -c, "import sys; sys.exit(7)"]\n')
    camp = project.campaign("camp", ["boom"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "failed" and rec["outcome"]["exit_code"] == 7
    assert rec["rules"] == ["RUN-EXIT"]  # the harness and the exit-code step: one judge
    step = json.loads((run / "post-steps" / "exit-code" / "verdict.json").read_text())
    assert step["reasons"] == [{"rule": "RUN-EXIT", "detail": "the container exited 7"}]
    assert project.harness("verify", str(run)).returncode == 0


def test_image_id_differing_from_the_lock_is_refused_before_any_container(project):
    (project.root / "images.lock").write_text(
        "images:\n  rehearsal:\n    id: sha256:" + "0" * 64
        + "\n    ref: harness-rehearsal:local\n")
    project.control("hello", 'command: [python3, -V]\n')
    camp = project.campaign("camp", ["hello"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "refused" and rec["rules"] == ["IMAGE-ID-MISMATCH"]
    assert rec["stages"] == [{"name": "preflight", "result": "refused",
                              "seconds": rec["stages"][0]["seconds"],
                              "rules": ["IMAGE-ID-MISMATCH"]}]
    assert not (run / "docker-vector.json").exists()
    assert not (run / "launcher-witness.json").exists()
    assert containers_with_label(f"org.harness.run-id={rec['run_id']}") == []
    assert rec["lock"] is None, "the lock is not even taken"
    assert project.harness("verify", str(run)).returncode == 0


def test_missing_image_is_an_environment_failure(project):
    (project.root / "images.lock").write_text(
        "images:\n  rehearsal:\n    id: sha256:" + "1" * 64 + "\n")
    project.control("hello", 'command: [python3, -V]\n')
    r = project.harness("run", str(project.campaign("camp", ["hello"])),
                        "--runs-dir", str(project.runs))
    assert r.returncode == 3
    assert project.record(project.run_dirs()[0])["rules"] == ["ENV-MISSING-IMAGE"]


def test_two_concurrent_runs_serialise_on_one_lock(project):
    project.control("sleep", SLEEPER.format(s=2))
    camp = project.campaign("camp", ["sleep"])
    procs = [project.popen("run", str(camp), "--runs-dir", str(project.runs)) for _ in range(2)]
    for p in procs:
        p.wait(timeout=120)
        assert p.returncode == 0, p.stderr.read()
    runs = project.run_dirs()
    assert len(runs) == 2
    spans = sorted((parse(project.record(r)["lock"]["acquired"]),
                    parse(project.record(r)["lock"]["released"])) for r in runs)
    assert spans[0][1] <= spans[1][0], f"hold intervals overlap: {spans}"
    waits = sorted(project.record(r)["lock"]["wait_s"] for r in runs)
    assert waits[1] > 1.0, "the second run waited for the first"


def test_sigkill_frees_the_lock_and_the_next_run_finds_the_orphan(project, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("sleep", SLEEPER.format(s=60))
    camp = project.campaign("camp", ["sleep"])
    p = project.popen("run", str(camp), "--runs-dir", str(project.runs))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if containers_with_label(f"org.harness.lock={project.lock}", all_states=False):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the container never started")
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    assert is_free(project.lock), "the kernel released the flock of the killed harness"
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 3, r.stderr
    newest = max(project.run_dirs(), key=lambda d: d.stat().st_mtime)
    rec = project.record(newest)
    assert rec["status"] == "refused" and "ENV-ORPHAN-CONTAINER" in rec["rules"]
    assert "docker-vector.json" not in os.listdir(newest), "nothing launched beside the orphan"


def test_timeout_stops_the_container_and_records_timed_out(project):
    project.control("slow", """\
        command: [python3, -c, "import time; time.sleep(120)"]
        timeout: 3
        stop_grace: 1
        """)
    t0 = time.monotonic()
    r = project.harness("run", str(project.campaign("camp", ["slow"])),
                        "--runs-dir", str(project.runs))
    assert r.returncode == 1
    assert time.monotonic() - t0 < 60
    rec = project.record(project.run_dirs()[0])
    assert rec["status"] == "timed-out" and rec["outcome"]["timed_out"] is True


def test_flipped_byte_fails_verify_naming_the_file(project):
    project.control("hello", 'command: [python3, -c, "print(42)"]\n')
    project.harness("run", str(project.campaign("camp", ["hello"])),
                    "--runs-dir", str(project.runs))
    [run] = project.run_dirs()
    target = run / "logs" / "stdout.log"
    target.chmod(0o644)
    data = bytearray(target.read_bytes())
    data[0] ^= 0x20
    target.write_bytes(bytes(data))
    r = project.harness("verify", str(run))
    assert r.returncode == 1
    assert "logs/stdout.log: changed" in r.stderr


def test_check_reports_faults_with_positions_and_exit_2(project):
    p = project.control("bad", "command: [x]\nnetwork: everywhere\n")
    r = project.harness("check", str(p))
    assert r.returncode == 2
    assert f"{p}:5:10: network:" in r.stderr
    assert "Traceback" not in r.stderr

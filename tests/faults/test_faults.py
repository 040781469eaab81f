"""Fault injection on the real Docker engine (`make faults`).

Each test kills or starves the harness at one stage and then checks the promises: the
lock is free, the run is sealed or visibly interrupted, nothing is half-written, and the
next run proceeds.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.base.timeutil import parse
from harness.measure.lock import GpuLock, is_free
from harness.measure.perflog import PERFLOG_DIR
from harness.measure.runfolder.manifest import verify_folder
from tests.conftest import containers_with_label

SHORT = 'command: [python3, -c, "print(1)"]\n'
LONG = 'command: [python3, -c, "import time; time.sleep(60)"]\ntimeout: 2m\nstop_grace: 2\n'


def wait_for(pred, limit: float = 60, what: str = "condition"):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def no_half_files(run_dir: Path) -> None:
    tmp = [p for p in run_dir.rglob(".*.tmp-*")]
    assert tmp == [], f"half-written temp files left: {tmp}"


def assert_recovered_by_next_run(project, camp: Path, killed_dir: Path) -> None:
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    assert (killed_dir / "SHA256SUMS").exists(), "the next run sealed the cut-off folder"
    assert verify_folder(killed_dir) == []
    rec = json.loads((killed_dir / "run.json").read_text())
    recovered = killed_dir / "recovered.json"
    assert rec["status"] == "interrupted" or (
        recovered.exists() and json.loads(recovered.read_text())["status"] == "interrupted")


def start(project, camp: Path, **env) -> subprocess.Popen:
    e = {**os.environ, **{k: str(v) for k, v in env.items()}}
    return project.popen("run", str(camp), "--runs-dir", str(project.runs), env=e)


def only_run(project) -> Path:
    [d] = project.run_dirs()
    return d


def stderr_lines(p: subprocess.Popen) -> list[str]:
    """The process's stderr lines as they come (read by a thread: a pipe never blocks us)."""
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")),
                     daemon=True).start()
    return lines


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL])
def test_kill_while_waiting_for_the_lock(project, sig):
    """The run waits for the lock before its folder exists: killed there, it leaves
    nothing (no folder, no perflog rows) for a run that never launched, and the lock and
    the next run are unaffected."""
    project.control("short", SHORT)
    camp = project.campaign("camp", ["short"])
    other = GpuLock(project.lock, run_id="someone-else", timeout=5)
    other.acquire()
    try:
        p = start(project, camp)
        err = stderr_lines(p)
        wait_for(lambda: any('"lock-wait"' in line for line in err),
                 what="the harness to wait for the lock")
        time.sleep(1.0)
        p.send_signal(sig)
        p.wait(timeout=30)
    finally:
        other.release()
    assert is_free(project.lock)
    assert project.run_dirs() == [] and not (project.runs / PERFLOG_DIR).exists()
    if sig != signal.SIGKILL:  # Ctrl-C exits 130, as everywhere; a stop signal 1
        assert p.returncode == (130 if sig == signal.SIGINT else 1), err
        assert any('"cancelled"' in line and "no run folder was made" in line for line in err)
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    assert [project.record(d)["status"] for d in project.run_dirs()] == ["accepted"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_kill_while_holding_the_lock_before_launch(project, sig, tmp_path):
    project.control("short", SHORT)
    camp = project.campaign("camp", ["short"])
    marker = tmp_path / "reached"
    p = start(project, camp, HARNESS_FAULTPOINT="lock-held", HARNESS_FAULTPOINT_MARKER=marker)
    wait_for(marker.exists, what="the lock-held fault point")
    assert not is_free(project.lock)
    p.send_signal(sig)
    p.wait(timeout=30)
    assert is_free(project.lock)
    d = only_run(project)
    assert not (d / "docker-vector.json").exists(), "nothing was launched"
    no_half_files(d)
    if sig == signal.SIGTERM:
        rec = project.record(d)
        assert rec["status"] == "interrupted" and rec["lock"]["released"] is not None
        assert verify_folder(d) == []
    else:
        assert_recovered_by_next_run(project, camp, d)


def test_sigterm_while_the_container_runs_stops_it_and_seals(project):
    project.control("long", LONG)
    camp = project.campaign("camp", ["long"])
    label = f"org.harness.lock={project.lock}"
    p = start(project, camp)
    wait_for(lambda: containers_with_label(label, all_states=False), what="the container")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    assert p.returncode == 1
    assert containers_with_label(label, all_states=False) == [], "SIGTERM stopped the container"
    d = only_run(project)
    rec = project.record(d)
    assert rec["status"] == "interrupted" and rec["outcome"]["interrupted"] is True
    assert verify_folder(d) == [] and is_free(project.lock)
    no_half_files(d)


def test_sigkill_while_the_container_runs_leaves_an_orphan_the_next_run_refuses_beside(
        project, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("long", LONG)
    camp = project.campaign("camp", ["long"])
    label = f"org.harness.lock={project.lock}"
    p = start(project, camp)
    wait_for(lambda: containers_with_label(label, all_states=False), what="the container")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert is_free(project.lock)
    killed = only_run(project)
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 3
    # Its workload may still write into the folder: it is not sealed while it runs.
    assert not (killed / "SHA256SUMS").exists(), "sealed while its container still runs"
    assert '"event": "recovery-deferred"' in r.stderr
    newest = next(d for d in project.run_dirs() if d != killed)
    assert "ENV-ORPHAN-CONTAINER" in project.record(newest)["rules"]
    # Once the orphan has exited, the next run seals the cut-off folder and removes it.
    [cid] = containers_with_label(label, all_states=False)
    subprocess.run(["docker", "kill", cid], capture_output=True, check=True)
    wait_for(lambda: not containers_with_label(label, all_states=False), what="its exit")
    project.control("long", SHORT)
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    assert (killed / "SHA256SUMS").exists(), "the killed run was sealed as interrupted"
    assert project.record(killed)["status"] == "interrupted"
    assert verify_folder(killed) == []
    assert containers_with_label(label) == [], "the exited orphan was removed"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_kill_during_a_post_step(project, sig):
    project.control("judged", SHORT + f"""\
post_steps:
  - name: slow-judge
    run: [{sys.executable}, -c, "import time; print('judging', flush=True); time.sleep(30)"]
""")
    camp = project.campaign("camp", ["judged"])
    p = start(project, camp)
    d = wait_for(lambda: project.run_dirs() and only_run(project), what="run folder")
    wait_for(lambda: (d / "post-steps/slow-judge/stdout.log").exists()
             and (d / "post-steps/slow-judge/stdout.log").stat().st_size > 0,
             what="the post-step to start")
    p.send_signal(sig)
    p.wait(timeout=30)
    assert is_free(project.lock)
    no_half_files(d)
    if sig == signal.SIGTERM:
        rec = project.record(d)
        assert rec["status"] == "interrupted"
        assert verify_folder(d) == []
    else:
        subprocess.run(["pkill", "-f", "print('judging'"], check=False)
        project.control("judged", SHORT)
        assert_recovered_by_next_run(project, camp, d)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_kill_while_sealing(project, sig, tmp_path):
    project.control("short", SHORT)
    camp = project.campaign("camp", ["short"])
    marker = tmp_path / "reached"
    p = start(project, camp, HARNESS_FAULTPOINT="sealing:2", HARNESS_FAULTPOINT_MARKER=marker)
    wait_for(marker.exists, what="the sealing fault point")
    p.send_signal(sig)
    p.wait(timeout=30)
    assert is_free(project.lock)
    d = only_run(project)
    no_half_files(d)
    if sig == signal.SIGTERM:
        # the seal is never cut short by a signal: it completes, then the harness stops
        assert verify_folder(d) == []
        assert project.record(d)["status"] == "accepted"
    else:
        assert (d / "run.json").exists() and not (d / "SHA256SUMS").exists()
        assert_recovered_by_next_run(project, camp, d)
        assert (d / "recovered.json").exists()


def test_oom_is_recorded(project):
    project.control("hog", """\
command: [python3, -c, "x = bytearray(512 * 1024 * 1024); print(len(x))"]
resources: {memory: 48m}
""")
    # Docker's State.OOMKilled comes from containerd's OOM event, which can lose the race
    # with the exit on a busy host (moby/moby#18510, hashicorp/nomad#13119): every attempt
    # must fail as killed (137), and the one Docker flags must be recorded as the OOM it is.
    camp = project.campaign("camp", ["hog"])
    seen: set[Path] = set()
    for _ in range(3):
        r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
        assert r.returncode == 1
        [run] = set(project.run_dirs()) - seen
        seen.add(run)
        rec = project.record(run)
        assert rec["status"] == "failed" and rec["outcome"]["exit_code"] == 137, rec
        assert rec["outcome"]["oom_killed"] == ("RUN-OOM" in rec["rules"])
        if rec["outcome"]["oom_killed"]:
            break
    assert rec["outcome"]["oom_killed"] is True, f"Docker never said OOM in {len(seen)} runs"


def test_a_container_ignoring_sigterm_is_killed_at_the_timeout(project):
    project.control("stubborn", """\
command:
  - python3
  - -c
  - import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)
timeout: 3
stop_grace: 1
""")
    t0 = time.monotonic()
    r = project.harness("run", str(project.campaign("camp", ["stubborn"])),
                        "--runs-dir", str(project.runs))
    took = time.monotonic() - t0
    assert r.returncode == 1 and took < 60, took
    rec = project.record(only_run(project))
    assert rec["status"] == "timed-out"
    assert containers_with_label(f"org.harness.lock={project.lock}") == []


def test_engine_unreachable_exits_3_before_the_lock(project, tmp_path):
    project.control("short", SHORT)
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such-docker.sock"}
    r = project.harness("run", str(project.campaign("camp", ["short"])),
                        "--runs-dir", str(project.runs), env=env)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    rec = project.record(only_run(project))
    assert rec["rules"] == ["ENV-NO-ENGINE"] and rec["lock"] is None
    assert "cannot reach the Docker engine" in rec["reasons"][0]["detail"]
    assert not project.lock.exists(), "the lock was never touched"


@pytest.fixture
def tiny_runs_dir(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"cannot mount a small tmpfs (this test needs root): {r.stderr}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_runs_folder_fails_clearly_and_claims_nothing_absent(project, tiny_runs_dir):
    project.control("loud", """\
command: [python3, -c, "import sys; [sys.stdout.write('x' * 1023 + chr(10)) for _ in range(4096)]"]
""")
    camp = project.campaign("camp", ["loud"])
    r = project.harness("run", str(camp), "--runs-dir", str(tiny_runs_dir))
    assert r.returncode in (1, 3), r.stderr
    assert "Traceback" not in r.stderr
    assert is_free(project.lock)
    [d] = [p for p in tiny_runs_dir.iterdir() if p.is_dir() and p.name != PERFLOG_DIR]
    sums = d / "SHA256SUMS"
    if sums.exists():
        problems = [p for p in verify_folder(d) if p.kind != "extra"]
        assert problems == [], f"the seal claims files that are not there: {problems}"
        rec = project.record(d)
        assert rec["status"] != "accepted"
    # the next run proceeds once there is room again
    r = project.harness("run", str(project.campaign("camp2", ["loud"])), "--runs-dir",
                        str(project.runs))
    assert r.returncode == 0, r.stderr


def test_eight_operators_on_one_lock_never_overlap(project):
    project.control("short", 'command: [python3, -c, "import time; time.sleep(0.3)"]\n')
    camp = project.campaign("camp", ["short"])
    t0 = time.monotonic()
    procs = [start(project, camp) for _ in range(8)]
    for p in procs:
        p.wait(timeout=300)
    took = time.monotonic() - t0
    codes = [p.returncode for p in procs]
    assert codes == [0] * 8, [p.stderr.read()[-2000:] for p in procs if p.returncode]
    spans = sorted((parse(project.record(d)["lock"]["acquired"]),
                    parse(project.record(d)["lock"]["released"])) for d in project.run_dirs())
    assert len(spans) == 8
    for (a0, a1), (b0, b1) in itertools.pairwise(spans):
        assert a1 <= b0, f"overlap: {a0}-{a1} and {b0}-{b1}"
    waits = [project.record(d)["lock"]["wait_s"] for d in project.run_dirs()]
    print(f"8 operators: all done in {took:.1f}s, max lock wait {max(waits):.1f}s, "
          f"no overlap among 8 hold intervals")


def test_a_symlink_planted_by_the_container_is_removed_and_refuses(project):
    project.control("planter", """\
command:
  - python3
  - -c
  - |
    import os
    out = os.environ["HARNESS_OBSERVATIONS_DIR"]
    os.symlink("/etc/shadow", out + "/x.json")
    os.mkfifo(out + "/p")
""")
    r = project.harness("run", str(project.campaign("camp", ["planter"])),
                        "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    d = only_run(project)
    rec = project.record(d)
    assert rec["status"] == "refused" and "EVIDENCE-NOT-REGULAR" in rec["rules"]
    assert not (d / "observations/x.json").is_symlink()
    removed = json.loads((d / "non-regular-removed.json").read_text())
    assert {e["path"] for e in removed} == {"observations/x.json", "observations/p"}
    assert verify_folder(d) == []

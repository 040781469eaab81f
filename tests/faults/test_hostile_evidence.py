"""Hostile evidence under faults: a SIGKILLed harness whose container planted traps, and
refinalizes that run at once, are killed mid-write, or meet a tampered or unsealed run.

The refinalize cases build a sealed run folder with the harness's own sealing (no Docker
needed: refinalize reads a folder); the recovery case uses the real engine.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import make_read_only, verify_folder, write_manifest
from tests.conftest import REPO, containers_with_label
from tests.faults.test_faults import wait_for
from tests.observations import engine_core, write_companions


def coreutils_ok(run: Path) -> bool:
    return subprocess.run(["sha256sum", "-c", "--strict", SUMS], cwd=run,
                          capture_output=True, timeout=60).returncode == 0


def folder_modes(run: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(run.stat().st_mode)}
    for root, dirs, _ in os.walk(run):
        for d in dirs:
            p = Path(root) / d
            out[str(p.relative_to(run))] = stat.S_IMODE(p.lstat().st_mode)
    return out


# ---- recovery of a cut-off run whose container planted traps (real engine) -----------------

PLANTER = """\
command:
  - python3
  - -c
  - |
    import os, time
    out = os.environ["HARNESS_OBSERVATIONS_DIR"]
    os.symlink("{host}", out + "/secret.json")
    os.mkfifo(out + "/pipe")
    with open(os.fsencode(out) + b"/bad\\xffname", "wb") as f:
        f.write(b"bytes under a non-UTF-8 name")
    with open(out + "/line\\u2028break", "w") as f:
        f.write("x")
    open(out + "/ready", "w").close()
    time.sleep(4)
timeout: 2m
"""


def test_sigkill_with_planted_traps_next_run_completes_and_seals_safely(
        project, tmp_path, cleanup_containers):
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    host = tmp_path / "host-secret.json"
    host.write_text('{"secret": 1}')
    host.chmod(0o600)
    project.control("planter", PLANTER.format(host=host))
    project.control("short", 'command: [python3, -c, "print(1)"]\n')
    camp = project.campaign("camp", ["planter", "short"])
    p = project.popen("run", str(camp), "--control", "planter", "--runs-dir", str(project.runs))
    cut = wait_for(lambda: project.run_dirs() and project.run_dirs()[0], what="run folder")
    wait_for((cut / "observations" / "ready").exists, what="the traps")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    wait_for(lambda: not containers_with_label(label, all_states=False), limit=60,
             what="the planter to exit")
    r = project.harness("run", str(camp), "--control", "short", "--runs-dir",
                        str(project.runs), timeout=120)
    newest = [d for d in project.run_dirs() if d != cut]
    assert newest and (newest[0] / SUMS).exists(), r.stderr
    assert r.returncode == 0, r.stderr
    assert (cut / SUMS).exists(), "the cut-off run was sealed by the next run"
    rec = project.record(cut)
    assert rec["status"] == "interrupted"
    assert {"RUN-INTERRUPTED", "EVIDENCE-NOT-REGULAR", "EVIDENCE-BAD-NAME"} <= set(rec["rules"])
    assert stat.S_IMODE(host.stat().st_mode) == 0o600, "the host file was never chmodded"
    sums = (cut / SUMS).read_text()
    assert "secret.json" not in sums and "pipe" not in sums
    removed = json.loads((cut / "non-regular-removed.json").read_text())
    paths = {e["path"] for e in removed}
    assert {"observations/secret.json", "observations/pipe", "observations/bad\\xffname",
            "observations/line\\u2028break"} <= paths
    assert project.harness("verify", str(cut)).returncode == 0
    assert coreutils_ok(cut)


# ---- refinalize: locked, atomic, and only over intact seals --------------------------------

def observation(phase: str) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"role": "EngineCore", "rank": 0, "pid": 659},
            "source": {"seal": "sha256:s", "engine": "vllm@x", "image": "sha256:i"},
            "complete": True, "fields": {"model.x": 1, "compilation.custom_ops": ["a"]}}


def sealed_run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "r1"
    (run / "observations").mkdir(parents=True)
    startup, generation = (engine_core(observation(phase)) for phase in ("startup", "generation"))
    (run / "observations" / "startup.json").write_text(json.dumps(startup))
    (run / "observations" / "generation.json").write_text(json.dumps(generation))
    write_companions(run / "observations", startup, generation)
    (run / "run.json").write_text(json.dumps({
        "schema": "harness.run/v1", "run_id": "r1", "status": "accepted",
        "seal": "sha256:s", "image": {"name": "img", "id": "sha256:i"}}))
    write_manifest(run)
    make_read_only(run)
    return run


def refinalize(run: Path, **env: str) -> subprocess.Popen:
    # --all-fields: the toy observations hold two fields, not vLLM's identity contract
    return subprocess.Popen([sys.executable, "-m", "harness", "refinalize", str(run),
                             "--all-fields"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **env})


def addenda(run: Path) -> list[str]:
    return sorted(os.listdir(run / "addenda")) if (run / "addenda").exists() else []


def test_concurrent_refinalizes_each_add_one_addendum_and_leave_it_sealed(tmp_path):
    run = sealed_run(tmp_path)
    procs = [refinalize(run) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert len(addenda(run)) == 4
    assert verify_folder(run) == []
    assert set(folder_modes(run).values()) == {0o555}, folder_modes(run)
    assert coreutils_ok(run)
    assert [n for n in os.listdir(run.parent) if n.startswith(".")] == []


def test_refinalize_killed_mid_write_leaves_an_intact_run_and_the_next_one_works(tmp_path):
    run = sealed_run(tmp_path)
    marker = tmp_path / "reached"
    p = refinalize(run, HARNESS_FAULTPOINT="addendum-sealed",
                   HARNESS_FAULTPOINT_MARKER=str(marker))
    wait_for(marker.exists, what="the addendum-sealed fault point")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert verify_folder(run) == [], "a cut-off addendum never reaches the sealed tree"
    assert addenda(run) == []
    assert stat.S_IMODE(run.stat().st_mode) == 0o555
    q = refinalize(run)
    _out, err = q.communicate(timeout=120)
    assert q.returncode == 0, err
    assert len(addenda(run)) == 1 and verify_folder(run) == []
    assert set(folder_modes(run).values()) == {0o555}
    assert [n for n in os.listdir(run.parent) if n.startswith(".")] == [], "stale temp left"
    # killed again, now with an addenda/ folder already there
    marker.unlink()
    p = refinalize(run, HARNESS_FAULTPOINT="addendum-sealed",
                   HARNESS_FAULTPOINT_MARKER=str(marker))
    wait_for(marker.exists, what="the fault point, second time")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert verify_folder(run) == [] and len(addenda(run)) == 1


def test_refinalize_refuses_a_tampered_run_and_writes_nothing(tmp_path):
    run = sealed_run(tmp_path)
    obs = run / "observations" / "generation.json"
    obs.chmod(0o644)
    # the same values in other bytes: the judge would accept them; the broken seal refuses
    obs.write_text(json.dumps(observation("generation"), indent=1))
    p = refinalize(run)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (out, err)
    assert "REFINALIZE-NOT-INTACT" in err and "observations/generation.json: changed" in err
    assert "accepted" not in out
    assert addenda(run) == [] and not (run / "addenda").exists()


def test_refinalize_refuses_an_unsealed_folder(tmp_path):
    run = sealed_run(tmp_path)
    (run / SUMS).unlink()
    p = refinalize(run)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "REFINALIZE-UNSEALED" in err, (out, err)
    assert not (run / "addenda").exists()


def test_refinalize_never_writes_through_a_symlinked_addenda(tmp_path):
    run = sealed_run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    run.chmod(0o755)
    os.symlink(outside, run / "addenda")
    run.chmod(0o555)
    p = refinalize(run)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "REFINALIZE-NOT-INTACT" in err, (out, err)
    assert list(outside.iterdir()) == []

"""`harness status` asks the real engine, through the docker CLI, which harness containers
run: every label comes back as the one value it was, hostile characters included, and an
engine that does not answer is a reason (exit 3), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from harness.readers import statuslines

pytestmark = pytest.mark.docker


def test_a_running_harness_container_is_listed_with_its_labels(rehearsal_image,
                                                               cleanup_containers) -> None:
    run_id = f"status-{uuid.uuid4().hex[:12]}"
    campaign = 'c,"a"=\x1b[31m'  # a comma, quotes, an equals sign and an escape: one value
    lock = f"/tmp/{run_id}/gpu.lock"
    cleanup_containers.append(f"org.harness.run-id={run_id}")
    cid = subprocess.run(
        ["docker", "run", "-d", "--network", "none", "--name", f"harness-{run_id}",
         "--label", f"org.harness.run-id={run_id}", "--label", f"org.harness.campaign={campaign}",
         "--label", f"org.harness.lock={lock}", rehearsal_image, "sleep", "60"],
        capture_output=True, text=True, check=True).stdout.strip()
    found, error = statuslines.containers()
    assert error is None
    [mine] = [c for c in found if c["run_id"] == run_id]
    assert mine == {"id": cid, "name": f"harness-{run_id}", "run_id": run_id,
                    "campaign": campaign, "control": None, "lock": lock, "device": None,
                    "launcher": None, "status": mine["status"]}
    assert mine["status"].startswith("Up")
    assert all(c["run_id"] for c in found)  # only containers with the run-id label


def test_an_engine_that_does_not_answer_is_a_reason_and_exit_3(tmp_path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    r = subprocess.run([sys.executable, "-m", "harness", "status", "--runs-dir",
                        str(tmp_path), "--lock", str(tmp_path / "gpu.lock"), "--json"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 3, r.stderr
    state = json.loads(r.stdout)
    assert state["containers"] == []
    assert "no-engine.sock" in state["engine_error"]
    assert "Traceback" not in r.stderr

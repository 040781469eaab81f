"""The idle check on the cpu profile against the real engine: a container the harness did
not launch, pinned on CPUs the control uses, refuses the run before launch naming it;
once it is gone, the same control runs. The clean check's cost is printed, never asserted
(it depends on the host's load: `make bench` is where figures live).

Marked `alone`: while the foreign container runs it would refuse any other run on this
host, so `make test` runs this file after the parallel workers are done."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from harness.base import catalogue
from harness.config.schema import Control
from harness.measure import engine
from harness.probe import idlewait

pytestmark = [pytest.mark.docker, pytest.mark.alone]


def _foreign(image: str, tag: str) -> str:
    """A container the harness did not launch, pinned on CPU 0."""
    return subprocess.run(
        ["docker", "run", "-d", "--network", "none", "--cpuset-cpus", "0",
         "--name", f"foreign-{tag}", "--label", f"test.idle-gpu={tag}", image, "sleep", "120"],
        capture_output=True, text=True, check=True).stdout.strip()


def test_the_check_names_a_foreign_container_until_it_is_gone(
        rehearsal_image, cleanup_containers) -> None:
    tag = uuid.uuid4().hex[:12]
    cleanup_containers.append(f"test.idle-gpu={tag}")
    cid = _foreign(rehearsal_image, tag)
    ctl = Control.model_validate({"name": "c1", "image": "img", "device": "cpu",
                                  "command": ["true"]})
    client = engine.client()

    doc, reasons = idlewait.check(ctl, phase="locked", run_id=f"r-{tag}", client=client)
    [mine] = [r for r in reasons if cid[:12] in r.detail]
    assert mine.rule == catalogue.ENV_GPU_BUSY
    assert f"foreign-{tag}" in mine.detail and "pinned on CPUs 0" in mine.detail
    assert doc["idle"] is False

    subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=True)
    started = time.perf_counter()
    doc, reasons = idlewait.check(ctl, phase="locked", run_id=f"r-{tag}", client=client)
    spent_ms = (time.perf_counter() - started) * 1000
    assert not [r for r in reasons if cid[:12] in r.detail]
    print(f"\nidle check on cpu: {spent_ms:.1f} ms ({len(doc['containers'])} other "
          f"container(s) running, idle={doc['idle']})")


def test_a_run_beside_a_foreign_container_is_refused_before_launch(
        project, cleanup_containers) -> None:
    tag = uuid.uuid4().hex[:12]
    cleanup_containers.append(f"test.idle-gpu={tag}")
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("hello", "command: [python3, -c, \"print('ran')\"]\n")
    camp = project.campaign("camp", ["hello"])
    cid = _foreign(project.image_id, tag)

    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 3, r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "refused" and rec["rules"] == [catalogue.ENV_GPU_BUSY]
    assert cid[:12] in rec["reasons"][0]["detail"]
    assert not (run / "outcome.json").exists(), "no container was started"
    idle = json.loads((run / "idle-gpu.json").read_text())
    assert idle["idle"] is False and idle["phase"] == "locked"

    subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=True)
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    newest = max(project.run_dirs(), key=lambda d: d.stat().st_mtime)
    assert project.record(newest)["status"] == "accepted"
    after = json.loads((newest / "idle-gpu-after.json").read_text())
    assert after["idle"] is True and after["phase"] == "exited"

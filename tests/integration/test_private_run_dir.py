"""While a run is open, no other host user can reach its output mount (found by review:
the mount is 0777 so any container uid can write, and the run folder was 0755)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness.measure.perflog import PERFLOG_DIR
from tests.conftest import containers_with_label

pytestmark = pytest.mark.docker


def test_another_host_user_cannot_plant_observations_while_the_container_runs(
        project, cleanup_containers, request):
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    project.control("writer", """\
        command: [python3, -c, "import os, time; time.sleep(3); d = os.environ['HARNESS_OBSERVATIONS_DIR']; open(d + '/mine.json', 'w').write('{}')"]
        timeout: 60
        """)  # noqa: E501
    runs = Path(tempfile.mkdtemp(prefix="harness-open-runs-"))  # reachable by other users
    runs.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(runs, ignore_errors=True))
    p = project.popen("run", str(project.campaign("camp", ["writer"])), "--runs-dir", str(runs))
    deadline = time.monotonic() + 60
    while not containers_with_label(label, all_states=False):
        assert time.monotonic() < deadline and p.poll() is None, "the container never started"
        time.sleep(0.1)
    [run_dir] = [d for d in runs.iterdir() if d.is_dir() and d.name != PERFLOG_DIR]
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    planted = subprocess.run(["runuser", "-u", "nobody", "--", "touch",
                              str(run_dir / "observations" / "generation.json")],
                             capture_output=True, text=True)
    assert planted.returncode != 0, "another host user could write the output mount"
    assert p.wait(timeout=120) == 0, p.communicate()
    assert (run_dir / "observations" / "mine.json").is_file(), "the workload still writes"
    assert not (run_dir / "observations" / "generation.json").exists()
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o555, "sealed: readable by all"
    assert os.access(run_dir, os.R_OK)


def test_a_second_start_of_the_same_run_id_is_refused_and_leaves_the_first_as_sealed(
        project, cleanup_containers):
    """Slurm can start a job's script twice (slurmctld killed before it saved the job as
    running re-queues it on restart): the second `harness run --run-id R` must not touch
    the first start's folder, and says so under its own rule (exit 3)."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("once", "command: [python3, -c, \"print('hi')\"]\ntimeout: 60\n")
    campaign = str(project.campaign("camp", ["once"]))
    run_id = "once-20261201T000000Z-0a1b2c3d"
    argv = ("run", campaign, "--control", "once", "--run-id", run_id, "--runs-dir",
            str(project.runs))
    first = project.harness(*argv)
    assert first.returncode == 0, first.stdout + first.stderr
    run_dir = project.runs / run_id
    before = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    second = project.harness(*argv)
    assert second.returncode == 3, second.stdout + second.stderr
    assert "ENV-RUN-EXISTS" in second.stderr and "already exists" in second.stderr
    assert "Traceback" not in second.stderr
    after = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert after == before
    assert project.harness("verify", str(run_dir)).returncode == 0


def test_a_run_id_of_a_repeated_control_is_one_run(project, cleanup_containers):
    """A Slurm job runs one repeat of a control the campaign repeats (`repeat: 3`) as
    `harness run --control C --run-id R`: that is one run, R, not a refusal of the plan."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("again", "command: [python3, -c, \"print('hi')\"]\ntimeout: 60\n")
    campaign = project.root / "campaigns" / "rep.yaml"
    campaign.write_text(f"name: rep\nrow: TEST\nlock: {project.lock}\nlock_timeout: 120\n"
                        "controls: [{control: again, repeat: 3}]\n")
    run_id = "again-20261201T000000Z-0a1b2c3e"
    r = project.harness("run", str(campaign), "--control", "again", "--run-id", run_id,
                        "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [d.name for d in project.run_dirs()] == [run_id]

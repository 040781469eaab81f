"""Hostile controls against the sandbox, on the real engine (`make faults`).

Variants of the issue's attacks: every character that could change docker's `--mount`, and
symlinks swapped in by a previous control or while the harness holds the lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import containers_with_label

# YAML double-quoted spellings of characters that must never reach `--mount`.
INJECTIONS = [",source=/etc", ",readonly=false", "=x", '\\"', "'", " x", "\\t", "\\n",
              "\\r", "\\0", "\\e", "\\u2028", "\\u00a0", "\\\\"]
READ = 'command: [python3, -c, "import sys; print(open(sys.argv[1]).read())", {path}]\n'


def wait_for(pred, limit: float = 60, what: str = "condition"):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_check_refuses_every_injection_at_its_position(project):
    """Every character, in each of the four places a path reaches `--mount`: exit 2, and
    each file's fault names the exact line of the bad value."""
    expected = {}
    for i, bad in enumerate(INJECTIONS):
        for where in ("target", "source", "model.target", "model.source"):
            value = f'"{"/m" if where.endswith("target") else "../data"}{bad}"'
            body = 'command: ["true"]\n'
            if where.startswith("model"):
                key = where.split(".")[1]
                other = "target: /mm" if key == "source" else "source: ../data"
                body += f"model:\n  {other}\n  {key}: {value}\n"
            else:
                other = "target: /m" if where == "source" else "source: ../data"
                body += f"mounts:\n  - {other}\n    {where}: {value}\n"
            ctl = project.control(f"c{i}-{where.replace('.', '-')}", body)
            expected[ctl] = len(ctl.read_text().splitlines())
    r = project.harness("check", *map(str, expected))
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "Traceback" not in out and "internal error" not in out, out
    for ctl, line in expected.items():
        assert f"{ctl}:{line}:" in out, (ctl, out)


def _planted_run(project, plant: str, reader: str, tmp_outside: Path,
                 planter_rules: tuple[str, ...] = ()) -> tuple[dict, Path]:
    """The planter's run is accepted unless it changed a file the campaign's seal holds
    (a read-only mount of the reader's is an input: then SEAL-CHANGED, naming it)."""
    data = project.root / "data"
    data.mkdir(exist_ok=True)
    data.chmod(0o777)
    project.control("planter", f"""\
        command: [python3, -c, "{plant}"]
        mounts:
          - {{source: ../data, target: /d, read_only: false}}
        """)
    project.control("reader", reader)
    camp = project.campaign("camp", ["planter", "reader"])
    assert project.harness("check", str(camp)).returncode == 0
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    runs = sorted(project.run_dirs(), key=lambda d: project.record(d)["times"]["created"])
    planter = project.record(runs[0])
    assert planter["rules"] == list(planter_rules), planter
    assert planter["status"] == ("refused" if planter_rules else "accepted")
    for p in project.runs.rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert b"host-only-secret" not in p.read_bytes(), p
    return project.record(runs[1]), runs[1]


@pytest.fixture
def outside(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("outside")
    (d / "secret.txt").write_text("host-only-secret\n")
    return d


def test_a_symlink_whose_target_holds_a_comma_never_reaches_docker(project, outside,
                                                                   cleanup_containers):
    """realpath gives `…/data/m,source=/OUTSIDE`: docker would mount OUTSIDE, the last
    `source=`. The folder is inside the roots, so only the vector's own check stops it."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    plant = (f"import os; os.makedirs('/d/m,source={outside}');"
             f" os.symlink('m,source={outside}', '/d/later')")
    rec, run = _planted_run(project, plant, READ.format(path="/m/secret.txt")
                            + "mounts:\n  - {source: ../data/later, target: /m}\n", outside)
    assert rec["status"] == "refused" and "MOUNT-UNSAFE-PATH" in rec["rules"], rec
    assert not (run / "docker-vector.json").exists()


def test_an_ancestor_swapped_for_a_symlink_is_refused(project, outside, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    (project.root / "data/sub/x").mkdir(parents=True)
    (outside / "x").mkdir()
    (outside / "x/secret.txt").write_text("host-only-secret\n")
    plant = f"import os; os.rename('/d/sub', '/d/old'); os.symlink('{outside}', '/d/sub')"
    rec, _ = _planted_run(project, plant, READ.format(path="/m/secret.txt")
                          + "mounts:\n  - {source: ../data/sub/x, target: /m}\n", outside)
    assert rec["status"] == "refused" and rec["rules"] == ["MOUNT-OUTSIDE-ROOTS"], rec


def test_a_file_mount_swapped_for_a_symlink_to_a_host_file_is_refused(project, outside,
                                                                      cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    (project.root / "data").mkdir()
    (project.root / "data/f.txt").write_text("fine\n")
    plant = f"import os; os.remove('/d/f.txt'); os.symlink('{outside}/secret.txt', '/d/f.txt')"
    # the reader's read-only file mount is an input of the campaign (it is in the seal), so
    # the planter's read-write mount over its folder is refused before anything is planted
    rec, _ = _planted_run(project, plant, READ.format(path="/m")
                          + "mounts:\n  - {source: ../data/f.txt, target: /m}\n", outside,
                          planter_rules=("MOUNT-OVER-HARNESS",))
    assert rec["status"] == "accepted", rec
    assert not (project.root / "data/f.txt").is_symlink()


def test_a_read_write_mount_over_the_runs_folder_is_refused(project, cleanup_containers):
    """A container that could write the runs folder could forge any run's evidence."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.runs.mkdir()
    project.control("forger", 'command: [python3, -c, "open(\'/r/forged\', \'w\')"]\n'
                    "mounts:\n  - {source: ../runs, target: /r, read_only: false}\n")
    r = project.harness("run", str(project.campaign("camp", ["forger"])),
                        "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [run] = project.run_dirs()
    assert project.record(run)["rules"] == ["MOUNT-OVER-HARNESS"]
    assert not (project.runs / "forged").exists()
    assert containers_with_label(f"org.harness.lock={project.lock}") == []


def test_swaps_while_the_lock_is_held_are_seen(project, tmp_path, outside):
    """Symlinks swapped after preflight, while the harness waits under the lock."""
    models = project.root / "models"
    for name in ("a", "b"):
        (models / name).mkdir(parents=True)
        (models / name / "w").write_text("same bytes\n")  # the hash alone cannot tell
    (models / "m").symlink_to(models / "a")
    (project.root / "data/real").mkdir(parents=True)
    (project.root / "data/link").symlink_to(project.root / "data/real")
    digest = hashlib.sha256(b"same bytes\n").hexdigest()
    project.control("swapped", f"""\
        command: ["true"]
        model: {{source: ../models/m, target: /model, sha256: {{w: "{digest}"}}}}
        mounts:
          - {{source: ../data/link, target: /d}}
        """)
    camp = project.campaign("camp", ["swapped"])
    marker = tmp_path / "reached"
    env = {**os.environ, "HARNESS_FAULTPOINT": "lock-held:3",
           "HARNESS_FAULTPOINT_MARKER": str(marker)}
    p = project.popen("run", str(camp), "--runs-dir", str(project.runs), env=env)
    wait_for(marker.exists, what="the lock-held fault point")
    (models / "m").unlink()
    (models / "m").symlink_to(models / "b")
    (project.root / "data/link").unlink()
    (project.root / "data/link").symlink_to(outside)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    [run] = project.run_dirs()
    rec = project.record(run)
    assert set(rec["rules"]) == {"MODEL-PATH-CHANGED", "MOUNT-OUTSIDE-ROOTS"}, rec
    pre = json.loads((run / "preflight.json").read_text())
    assert pre["model_path"]["real"] == str(models / "a")
    assert not (run / "docker-vector.json").exists()


def test_the_rewritten_campaign_of_the_red_team_fails_check(project):
    """What a workload wrote through `../campaigns` (now refused at launch): `/` as a mount
    root and a control mounting `/run` to reach the Docker socket; `check` names both."""
    project.control("sock", 'command: ["true"]\nmounts:\n  - {source: /run, target: /h}\n')
    camp = project.campaign("camp", ["sock"], "mount_roots: [/]\n")
    r = project.harness("check", str(camp))
    assert r.returncode == 2 and f"{camp}:6:" in r.stdout + r.stderr, r.stdout + r.stderr
    camp = project.campaign("camp", ["sock"], "mount_roots: [/run]\n")
    r = project.harness("check", str(camp))
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "MOUNT-SYSTEM-PATH" in out, out
    assert f"{project.root / 'controls/sock.yaml'}:6:" in out, out


def test_a_link_to_the_docker_socket_folder_is_refused_even_read_only(project,
                                                                        cleanup_containers):
    """Roots that include `/run` (a campaign may name one): control 1 plants `later -> /run`,
    control 2 mounts it read-only to talk to docker.sock. Refused at launch, nothing run."""
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    data = project.root / "data"
    data.mkdir()
    data.chmod(0o777)
    project.control("planter", """\
        command: [python3, -c, "import os; os.symlink('/run', '/d/later')"]
        mounts:
          - {source: ../data, target: /d, read_only: false}
        """)
    project.control("caller", 'command: [python3, -c, "import socket; s = socket.socket('
                    "socket.AF_UNIX); s.connect('/h/docker.sock'); print('CONNECTED')\"]\n"
                    "mounts:\n  - {source: ../data/later, target: /h}\n")
    camp = project.campaign("camp", ["planter", "caller"], f"mount_roots: [{data}, /run]\n")
    assert project.harness("check", str(camp)).returncode == 0
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    runs = sorted(project.run_dirs(), key=lambda d: project.record(d)["times"]["created"])
    assert project.record(runs[0])["status"] == "accepted"
    rec = project.record(runs[1])
    assert rec["status"] == "refused" and rec["rules"] == ["MOUNT-SYSTEM-PATH"], rec
    assert not (runs[1] / "docker-vector.json").exists(), "nothing launched"
    assert containers_with_label(label) == []

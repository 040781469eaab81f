"""The sandbox on the real Docker engine: the issue's attacks, reproduced and refused."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time

from tests.conftest import containers_with_label

READ = 'command: [python3, -c, "import sys; print(open(sys.argv[1]).read())", {path}]\n'


def test_a_comma_in_a_target_is_refused_before_anything_runs(project, cleanup_containers):
    """The issue's control: it used to pass check and mount /some/host/dir read-write."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    (project.root / "data").mkdir()
    host = project.root / "host-dir"
    host.mkdir()
    ctl = project.control("inject", f"""\
        command: [python3, -c, "open('/m/pwned', 'w').write('x')"]
        mounts:
          - source: ../data
            target: "/m,source={host}"
            read_only: false
        """)
    camp = project.campaign("camp", ["inject"])
    r = project.harness("check", str(ctl))
    assert r.returncode == 2 and f"{ctl}:7:" in r.stderr + r.stdout, r.stderr
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert not (host / "pwned").exists()
    assert containers_with_label(f"org.harness.lock={project.lock}") == []


def test_a_symlink_planted_by_one_control_does_not_open_the_host_to_the_next(
        project, tmp_path_factory, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    outside = tmp_path_factory.mktemp("outside")  # not under the project (the mount root)
    (outside / "secret.txt").write_text("host-only-secret\n")
    data = project.root / "data"
    data.mkdir()
    data.chmod(0o777)  # the container's root has no capabilities (cpu profile)
    project.control("planter", f"""\
        command: [python3, -c, "import os; os.symlink('{outside}', '/d/later')"]
        mounts:
          - {{source: ../data, target: /d, read_only: false}}
        """)
    project.control("reader", READ.format(path="/m/secret.txt")
                    + "mounts:\n  - {source: ../data/later, target: /m}\n")
    camp = project.campaign("camp", ["planter", "reader"])
    assert project.harness("check", str(camp)).returncode == 0
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    planter, reader = sorted(project.run_dirs(), key=lambda d: project.record(d)["times"]
                             ["created"])
    assert project.record(planter)["status"] == "accepted"
    assert (data / "later").is_symlink(), "the attack was really planted"
    rec = project.record(reader)
    assert rec["status"] == "refused" and "MOUNT-OUTSIDE-ROOTS" in rec["rules"], rec
    assert any(str(outside) in reason["detail"] for reason in rec["reasons"])
    assert not (reader / "docker-vector.json").exists(), "nothing launched"
    for p in project.runs.rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert b"host-only-secret" not in p.read_bytes(), p


def test_the_resolved_source_is_mounted_and_recorded(project):
    (project.root / "data/real").mkdir(parents=True)
    (project.root / "data/real/f.txt").write_text("inside\n")
    (project.root / "data/link").symlink_to(project.root / "data/real")
    project.control("reader", READ.format(path="/m/f.txt")
                    + "mounts:\n  - {source: ../data/link, target: /m}\n")
    r = project.harness("run", str(project.campaign("camp", ["reader"])),
                        "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [run] = project.run_dirs()
    assert (run / "logs/stdout.log").read_text() == "inside\n\n"
    ev = json.loads((run / "docker-vector.json").read_text())
    [m] = [m for m in ev["mounts"] if m["role"] == "control"]
    assert m["declared"] == str(project.root / "data/link")
    assert m["source"] == str(project.root / "data/real")
    assert f"type=bind,source={project.root / 'data/real'},target=/m,readonly" in ev["argv"]


def test_a_secret_engine_argument_reaches_the_driver_and_nothing_else(project):
    value = "s3cr3t-value"
    project.control("engine", """\
        instrument: true
        engine: {hf_token: s3cr3t-value, dtype: bfloat16}
        command:
          - python3
          - -c
          - |
            import hashlib, os
            from harness_observer.driver import engine_args
            args = engine_args(os.environ["HARNESS_ENGINE_ARGS"])
            print(hashlib.sha256(args["hf_token"].encode()).hexdigest(), args["dtype"])
        """)
    r = project.harness("run", str(project.campaign("camp", ["engine"])),
                        "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    [run] = project.run_dirs()
    digest = hashlib.sha256(value.encode()).hexdigest()
    assert (run / "logs/stdout.log").read_text() == f"{digest} bfloat16\n"
    for p in run.rglob("*"):
        if p.is_file():
            assert value.encode() not in p.read_bytes(), p
    env = json.loads((run / "container-inspect.json").read_text())["inspect"]["Config"]["Env"]
    [entry] = [e for e in env if e.startswith("HARNESS_ENGINE_SECRET_0=")]
    marker = hashlib.sha256(json.dumps(value).encode()).hexdigest()
    assert entry.endswith(f"<redacted sha256:{marker}>")
    assert value not in r.stderr + r.stdout


def test_an_exited_orphan_of_a_killed_run_is_removed_by_the_next_run(project,
                                                                      cleanup_containers):
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    project.control("nap", 'command: [python3, -c, "import time; time.sleep(4)"]\n')
    camp = project.campaign("camp", ["nap"])
    p = project.popen("run", str(camp), "--runs-dir", str(project.runs))
    deadline = time.monotonic() + 60
    while not containers_with_label(label, all_states=False):
        assert time.monotonic() < deadline, "the container never started"
        time.sleep(0.1)
    [old] = containers_with_label(label)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    deadline = time.monotonic() + 60
    while containers_with_label(label, all_states=False):
        assert time.monotonic() < deadline, "the orphan never exited"
        time.sleep(0.2)
    assert containers_with_label(label) == [old], "the exited orphan is still there"
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    assert containers_with_label(label) == [], "the orphan was removed"
    newest = max(project.run_dirs(), key=lambda d: project.record(d)["times"]["created"])
    assert project.record(newest)["status"] == "accepted"
    removed = json.loads((newest / "orphans-removed.json").read_text())["containers"]
    assert [c["id"][:12] for c in removed] == [old[:12]] and removed[0]["removed"] is True
    assert removed[0]["exit_code"] == 0
    assert '"event": "orphan-removed"' in r.stderr
    rm = subprocess.run(["docker", "ps", "-aq", "--filter", f"id={old}"],
                        capture_output=True, text=True, check=True)
    assert rm.stdout.strip() == ""


def test_a_control_cannot_rewrite_its_own_campaign(project, cleanup_containers):
    """The red team's chain: `../campaigns` read-write let the workload add `mount_roots:
    [/]` and a control that talks to the Docker socket, owned by the next run."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    project.control("rewriter", """\
        command: [python3, -c, "open('/c/camp.yaml', 'a').write('mount_roots: [/]\\\\n')"]
        mounts:
          - {source: ../campaigns, target: /c, read_only: false}
        """)
    camp = project.campaign("camp", ["rewriter"])
    before = camp.read_bytes()
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [run] = project.run_dirs()
    assert project.record(run)["rules"] == ["MOUNT-OVER-HARNESS"]
    assert camp.read_bytes() == before
    assert containers_with_label(f"org.harness.lock={project.lock}") == []


def test_a_control_cannot_rewrite_the_projects_image_build(project, cleanup_containers):
    """The red team's chain: `../images` read-write let the workload append to
    `images/rehearsal/build.py`, which `make image` runs next on the host."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    build = project.root / "images/rehearsal/build.py"
    build.parent.mkdir(parents=True)
    build.write_text("print('build')\n")
    project.control("rewriter", """\
        command: [sh, -c, "echo 'print(1)' >> /i/rehearsal/build.py"]
        mounts:
          - {source: ../images, target: /i, read_only: false}
        """)
    camp = project.campaign("camp", ["rewriter"])
    assert project.harness("check", str(camp)).returncode == 0
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "refused" and rec["rules"] == ["MOUNT-OVER-HARNESS"], rec
    assert not (run / "docker-vector.json").exists(), "nothing launched"
    assert build.read_text() == "print('build')\n"
    assert containers_with_label(f"org.harness.lock={project.lock}") == []


def test_a_nested_root_swapped_for_a_link_to_slash_widens_nothing(project, tmp_path_factory,
                                                                  cleanup_containers):
    """Roots [scratch, scratch/models]: control 1 (scratch read-write) swaps models for a
    link to `/`; control 2 mounts a host folder through it. Roots are fixed at load."""
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("host-only-secret\n")
    scratch = project.root / "scratch"
    (scratch / "models").mkdir(parents=True)
    scratch.chmod(0o777)
    project.control("swapper", """\
        command: [python3, -c, "import os; os.rename('/s/models', '/s/old'); os.symlink('/', '/s/models')"]
        mounts:
          - {source: ../scratch, target: /s, read_only: false}
        """)  # noqa: E501
    project.control("reader", READ.format(path="/m/secret.txt")
                    + f"mounts:\n  - {{source: ../scratch/models{outside}, target: /m}}\n")
    camp = project.campaign("camp", ["swapper", "reader"],
                            f"mount_roots: [{scratch}, {scratch}/models]\n")
    assert project.harness("check", str(camp)).returncode == 0
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    swapper, reader = sorted(project.run_dirs(), key=lambda d: project.record(d)["times"]
                             ["created"])
    assert project.record(swapper)["status"] == "accepted"
    assert (scratch / "models").is_symlink(), "the attack was really planted"
    rec = project.record(reader)
    assert rec["status"] == "refused" and rec["rules"] == ["MOUNT-OUTSIDE-ROOTS"], rec
    assert not (reader / "docker-vector.json").exists(), "nothing launched"
    for p in project.runs.rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert b"host-only-secret" not in p.read_bytes(), p


def test_one_lock_through_a_symlinked_folder_still_sees_the_running_orphan(
        project, cleanup_containers):
    """Two campaigns name the same lock, one through a symlinked folder: the second must see
    the first's container (outliving its SIGKILLed harness) and refuse to run beside it."""
    label = f"org.harness.lock={project.lock}"
    cleanup_containers.append(label)
    (project.root / "via").symlink_to(project.root / "locks")
    project.control("nap", 'command: [python3, -c, "import time; time.sleep(60)"]\n')
    first = project.campaign("first", ["nap"])
    second = project.root / "campaigns/second.yaml"
    second.write_text(first.read_text().replace("name: first", "name: second")
                      .replace(str(project.lock), str(project.root / "via/gpu.lock")))
    p = project.popen("run", str(first), "--runs-dir", str(project.runs))
    deadline = time.monotonic() + 60
    while not containers_with_label(label, all_states=False):
        assert time.monotonic() < deadline, "the container never started"
        time.sleep(0.1)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    r = project.harness("run", str(second), "--runs-dir", str(project.runs))
    assert r.returncode == 3, r.stderr
    [done] = [d for d in project.run_dirs() if (d / "run.json").exists()]  # the second's
    assert "ENV-ORPHAN-CONTAINER" in project.record(done)["rules"]
    assert len(containers_with_label(label)) == 1, "nothing launched beside it"

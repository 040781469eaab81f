"""On the real engine: a `sealed: false` mount whose script is edited between two runs (its
size and mtime put back, so only its bytes and ctime tell) makes `harness diff` name the
mount and refuse to call the runs a plain repeat, and `harness rerun --dry-run` say so too;
two runs over the unchanged mount are a plain repeat."""

from __future__ import annotations

import json
import os

from tests.conftest import containers_with_label


def test_diff_names_a_changed_unsealed_mount_and_no_plain_repeat(project, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    env = {**os.environ, "HARNESS_MOUNT_CACHE": str(project.root / "mount-cache.json")}
    tools = project.root / "tools"
    tools.mkdir()
    script = tools / "run.py"
    script.write_text("print('answer 1')\n")
    project.control("tooled", """\
        command: [python3, /opt/tools/run.py]
        mounts:
          - {source: ../tools, target: /opt/tools, sealed: false}
        """)
    camp = project.campaign("camp", ["tooled"])

    def run() -> str:
        r = project.harness("run", str(camp), "--runs-dir", str(project.runs), env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        return str(project.sealed_in_order()[-1])

    first = run()
    st = script.stat()
    script.write_text("print('answer 2')\n")  # same size
    os.utime(script, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = run()
    third = run()
    outputs = [(project.root / "runs" / os.path.basename(r) / "logs/stdout.log").read_text()
               for r in (first, second)]
    assert outputs == ["answer 1\n", "answer 2\n"], outputs  # the runs really differed

    pre = json.loads((project.root / "runs" / os.path.basename(second)
                      / "preflight.json").read_text())
    [mount] = pre["mounts"]
    assert mount["target"] == "/opt/tools" and mount["digest"].startswith("sha256:")
    assert mount["counts"]["files"] == 1 and mount["why"] is None

    d = project.harness("diff", first, second, env=env)
    assert d.returncode == 0, d.stderr
    lines = d.stdout.splitlines()
    assert "not a repeat: mounts (/opt/tools) changed" in lines, d.stdout
    assert "plain repeat" not in d.stdout
    assert "mounts: 1 of 1 differ" in lines, d.stdout
    assert any(x.startswith("    /opt/tools: differs (a: 1 files, 18 bytes") for x in lines)
    assert any(x.startswith("seal: same") for x in lines), d.stdout  # the seal cannot tell
    doc = json.loads(project.harness("diff", first, second, "--json", env=env).stdout)
    assert doc["repeat"] == {"plain": False, "changed": ["mounts"], "unknown": []}

    again = project.harness("diff", second, third, env=env)
    assert "plain repeat: same seal, inputs, git, image, model, mount contents, " \
        "engine args, env and docker argv" in again.stdout.splitlines(), again.stdout

    dry = project.harness("rerun", first, "--reason", "check", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "not a plain repeat: seal unchanged, but a mount's content changed" in dry.stdout
    assert "  mount /opt/tools: differs (a: 1 files, 18 bytes" in dry.stdout, dry.stdout
    for r in (first, second, third):
        assert project.harness("verify", r).returncode == 0
    assert containers_with_label(f"org.harness.lock={project.lock}") == []

"""A real `harness run` imports what it needs the ordinary way: every harness module in
its main thread, before the container starts, and the run seals as it always did."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import atexit, json, sys, threading
seen = {}
def audit(event, args):
    if event == "import" and args[0].startswith("harness."):
        seen.setdefault(threading.current_thread().name, []).append(args[0])
    if event == "subprocess.Popen" and list(args[1] or [])[1:2] == ["run"]:  # the container
        seen.setdefault("before the container", len(seen.get("MainThread", [])))
sys.addaudithook(audit)
atexit.register(lambda: print(json.dumps(seen), file=sys.stderr))
from harness.cli.main import main
main(sys.argv[1:])
"""


def test_every_module_is_imported_in_the_main_thread_before_the_container(project):
    project.control("quick", 'command: ["true"]\ntimeout: 1m\n')
    camp = project.campaign("camp", ["quick"])
    r = subprocess.run([sys.executable, "-c", CODE, "run", str(camp), "--runs-dir",
                        str(project.runs)], capture_output=True, text=True, timeout=180,
                       cwd=project.root)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stderr.strip().splitlines()[-1])
    assert set(seen) == {"MainThread", "before the container"}, seen
    before = seen["MainThread"][:seen["before the container"]]
    for module in ("harness.pipeline.launch", "harness.pipeline.post",
                   "harness.pipeline.finish", "harness.measure.perflog"):
        assert module in before, module
    [run] = project.run_dirs()
    assert project.record(run)["status"] == "accepted"
    assert project.harness("verify", str(run)).returncode == 0

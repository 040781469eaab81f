"""A real `harness run` loads what it needs after the container while the container runs
(harness.pipeline.warm), and seals the run as before."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import atexit, json, sys, threading
seen = {}
def audit(event, args):
    if event == "import" and args[0] in ("harness.measure.metrics", "harness.pipeline.launch"):
        seen[args[0]] = threading.current_thread().name
sys.addaudithook(audit)
atexit.register(lambda: print(json.dumps(seen), file=sys.stderr))
from harness.cli.main import main
main(sys.argv[1:])
"""


def test_the_after_container_modules_load_in_the_warm_thread(project):
    project.control("quick", 'command: ["true"]\ntimeout: 1m\n')
    camp = project.campaign("camp", ["quick"])
    r = subprocess.run([sys.executable, "-c", CODE, "run", str(camp), "--runs-dir",
                        str(project.runs)], capture_output=True, text=True, timeout=180,
                       cwd=project.root)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stderr.strip().splitlines()[-1])
    assert seen == {"harness.pipeline.launch": "MainThread", "harness.measure.metrics": "harness-warm"}
    [run] = project.run_dirs()
    assert project.record(run)["status"] == "accepted"
    assert project.harness("verify", str(run)).returncode == 0

"""What `harness run` loads before its container, and what it loads while the container
runs (harness.pipeline.warm): the start of a short control is mostly imports.

Import checks run a fresh interpreter (this one has imported everything already)."""

from __future__ import annotations

import gc
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import main as cli_main
from harness.pipeline import warm

REPO = Path(__file__).resolve().parents[2]

# Used only once the container has exited (or only inside a Slurm job, or only by
# `harness images`): none of them is time before the launch.
AFTER_CONTAINER = {"harness.pipeline.finish", "harness.pipeline.post", "harness.measure.perflog",
                   "filelock", "harness.measure.metrics", "harness.measure.slurm.job",
                   "harness.measure.images",
                   "harness.measure.imagearchive"}


def _fresh(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_run_command_loads_nothing_it_needs_only_after_the_container() -> None:
    loaded = set(_fresh("import json, sys\nimport harness.cli.core\n"
                        "print(json.dumps(sorted(sys.modules)))"))
    assert "harness.pipeline.launch" in loaded and "docker" in loaded  # the launch did load
    assert not AFTER_CONTAINER & loaded


def test_warm_imports_in_a_daemon_thread_and_wait_joins_it() -> None:
    got = _fresh(
        "import json, sys, threading\n"
        "from harness.pipeline import warm\n"
        "seen = {}\n"
        "def audit(event, args):\n"
        "    if event == 'import' and args[0] == 'harness.measure.metrics':  # finish's\n"
        "        seen['thread'] = threading.current_thread().name\n"
        "sys.addaudithook(audit)\n"
        "t = warm.start()\n"
        "daemon = t.daemon\n"
        "warm.wait()\n"
        "print(json.dumps({'thread': seen.get('thread'), 'daemon': daemon,\n"
        "                  'alive': t.is_alive(), 'again': warm.start() is None,\n"
        "                  'loaded': [m in sys.modules for m in warm.AFTER_CONTAINER]}))")
    assert got == {"thread": "harness-warm", "daemon": True, "alive": False, "again": True,
                   "loaded": [True] * len(warm.AFTER_CONTAINER)}


def test_a_failed_warm_import_is_left_for_the_main_threads_own_import() -> None:
    name = "harness.pipeline.no_such_stage"
    assert warm.start((name,)) is not None
    warm.wait()  # no error here: the thread swallowed it
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def test_a_commands_module_imports_with_the_collector_paused_and_frozen_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    during = []

    module = object()

    def record(name: str) -> object:
        during.append(gc.isenabled())
        return module

    monkeypatch.setattr(cli_main, "importlib", SimpleNamespace(import_module=record))
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    assert cli_main._import("harness.cli.check") is module
    assert during == [False] and gc.isenabled()
    assert gc.get_freeze_count() >= frozen
    gc.disable()  # a caller that had it off keeps it off
    try:
        cli_main._import("harness.cli.check")
        assert not gc.isenabled()
    finally:
        gc.enable()

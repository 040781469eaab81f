"""harness/judge/ is pure: no judge module starts a process or a thread or talks to Docker.

A judge decides on facts handed to it; what runs git, ssh-keygen, a gate's command or asks
the Docker engine lives in harness/probe/ (import-linter keeps judge from importing it).
This walks every judge module's syntax tree, lazy imports and aliases included, so a new
module cannot quietly start running things where a newcomer expects only decisions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

JUDGE = Path(__file__).resolve().parents[2] / "harness" / "judge"

# Modules whose import means running, threading or asking the engine.
MODULES = ("subprocess", "docker", "threading", "_thread", "multiprocessing",
           "concurrent.futures", "pty", "asyncio")
# os functions that start, replace or signal a process.
OS_CALLS = frozenset({"system", "popen", "fork", "forkpty", "kill", "killpg", "posix_spawn",
                      "posix_spawnp", "execl", "execle", "execlp", "execlpe", "execv", "execve",
                      "execvp", "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv",
                      "spawnve", "spawnvp", "spawnvpe"})
DYNAMIC = frozenset({"__import__", "import_module"})


def _banned(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in MODULES)


def offences(source: str) -> list[str]:
    """Each line of `source` that imports a banned module or calls a process-starting os
    function, as 'LINE: what' (by any alias: `import os as o`, `from os import system`)."""
    tree = ast.parse(source)
    os_names = {"os"}  # names bound to the os module
    os_funcs: set[str] = set()  # names bound to a banned os function
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _banned(alias.name):
                    found.append(f"{node.lineno}: import {alias.name}")
                if alias.name == "os":
                    os_names.add(alias.asname or "os")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _banned(node.module) or _banned(full):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                if node.module == "os" and alias.name in OS_CALLS:
                    os_funcs.add(alias.asname or alias.name)
                    found.append(f"{node.lineno}: from os import {alias.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in os_names and func.attr in OS_CALLS):
            found.append(f"{node.lineno}: {func.value.id}.{func.attr}()")
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in DYNAMIC and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and _banned(node.args[0].value):
            found.append(f"{node.lineno}: {name}({node.args[0].value!r})")
    return sorted(set(found))


@pytest.mark.parametrize("source", [
    "import subprocess",
    "import subprocess as sp",
    "from subprocess import run",
    "from subprocess import Popen as P",
    "import docker",
    "import docker.errors",
    "from docker import errors",
    "from docker.errors import APIError",
    "import threading",
    "from threading import Thread",
    "import _thread",
    "from concurrent.futures import ThreadPoolExecutor",
    "from concurrent import futures",
    "import multiprocessing.pool",
    "import pty",
    "import asyncio",
    "def later():\n    import subprocess\n    return subprocess",  # a lazy import
    "if False:\n    import docker",
    "import os\nos.system('git status')",
    "import os as o\no.system('x')",
    "from os import system\nsystem('x')",
    "from os import system as s\ns('x')",
    "import os\nos.popen('x')",
    "import os\nos.execvp('git', ['git'])",
    "import os\nos.posix_spawn('/bin/true', [], {})",
    "import os\nos.fork()",
    "__import__('subprocess')",
    "import importlib\nimportlib.import_module('docker.errors')",
])
def test_every_way_in_is_seen(source):
    assert offences(source), source


@pytest.mark.parametrize("source", [
    '"""This judge never imports subprocess, docker or threading."""',
    "import os\nos.path.join('a', 'b')\nos.stat('x')",
    "from harness.measure.provenance import CleanCheck",
    "from harness.judge.approval.signature import SignatureCheck",
    "import dockerfile_parse",  # a name that only starts like a banned one
    "system('x')",  # not os's
    "from . import subprocess",  # a sibling module of that name, not the stdlib's
])
def test_what_is_not_running_is_not_flagged(source):
    assert offences(source) == []


def test_no_judge_module_runs_anything():
    files = sorted(JUDGE.rglob("*.py"))
    assert len(files) > 40  # the walk sees the whole judge, not an empty folder
    found = {str(f.relative_to(JUDGE.parent)): offences(f.read_text(encoding="utf-8"))
             for f in files}
    assert {name: lines for name, lines in found.items() if lines} == {}

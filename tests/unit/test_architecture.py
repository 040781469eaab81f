"""The shape of the code (docs/architecture.md): one-way layers, one Docker client, one owner each.

These read the source tree, not behaviour: each fails when a change breaks a rule the
architecture page states, with the offending file named.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness.config.builtins import POSTSTEPS
from harness.judge.poststeps import BUILTINS

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
# The only module that may create a Docker client.
ENGINE = HARNESS / "measure" / "engine.py"
CLIENT_CALL = re.compile(r"\bfrom_env\s*\(|\bDockerClient\s*\(|\bAPIClient\s*\(")
# Time stamps are formatted only by harness/base/timeutil.py (utc_now, iso, stamp). The
# instrument runs in the container on the standard library alone, so it is not checked.
TIME_FORMAT = re.compile(r"\.strftime\(|\.isoformat\(|\btime\.time\(\)")
TIMEUTIL = HARNESS / "base" / "timeutil.py"
INSTRUMENT = HARNESS / "instrument"
# Still formatting their own stamps; owned by other work in progress, to move to timeutil.
OWN_TIME_FORMAT: frozenset[str] = frozenset()


def _sources() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if "__pycache__" not in p.parts)


def _lint_imports() -> str:
    """The lint-imports next to this interpreter (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "lint-imports"
    found = str(here) if here.exists() else shutil.which("lint-imports")
    assert found, "lint-imports is not installed: pip install -e '.[dev]'"
    return found


def test_the_import_contracts_hold() -> None:
    """Layers, no cycles between siblings, a stdlib-only instrument: lazy imports count too."""
    proc = subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0 and " 0 broken" in proc.stdout, (
        proc.stdout[-6000:] + proc.stderr[-2000:]
    )


def test_only_the_engine_module_creates_a_docker_client() -> None:
    offenders = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in _sources()
        if p != ENGINE
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if CLIENT_CALL.search(line)
    ]
    assert not offenders, "create Docker clients only in harness/measure/engine.py:\n" + "\n".join(
        offenders
    )


def test_the_client_grep_would_see_a_client() -> None:
    """The grep above is not vacuous: it matches the engine's own client creation."""
    assert CLIENT_CALL.search(ENGINE.read_text(encoding="utf-8"))


def test_built_in_post_step_names_have_one_owner_and_a_module_each() -> None:
    """Config owns the names (it sits below the judges); every name runs as a module."""
    assert tuple(BUILTINS) == POSTSTEPS
    for name, module in BUILTINS.items():
        assert callable(importlib.import_module(module).run), name


def test_time_stamps_are_formatted_only_by_timeutil() -> None:
    found: dict[str, list[str]] = {}
    for p in _sources():
        if p == TIMEUTIL or INSTRUMENT in p.parents:
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if TIME_FORMAT.search(line):
                found.setdefault(str(p.relative_to(ROOT)), []).append(f"{n}: {line.strip()}")
    new = {name: lines for name, lines in found.items() if name not in OWN_TIME_FORMAT}
    assert not new, f"use harness.base.timeutil (utc_now, iso) for time stamps: {new}"
    stale = sorted(OWN_TIME_FORMAT - set(found))
    assert not stale, f"these use timeutil now, drop them from OWN_TIME_FORMAT: {stale}"


# -- one lock primitive, one bounded reader --------------------------------------------------

FLOCK = HARNESS / "base" / "flock.py"  # the one lock primitive: every lock takes it
LOCK_MODULES = frozenset({"fcntl", "filelock"})
READFILE = HARNESS / "base" / "readfile.py"  # the one "at most N bytes" loop (`read_fd`)
# Loops over a descriptor that are other ideas than "read at most N bytes", each kept:
STREAM_LOOPS = {
    HARNESS / "base" / "hashing.py": "hashes a file of any size in chunks",
    HARNESS / "measure" / "execute.py": "copies a container's stream of any length to its log",
    HARNESS / "measure" / "host" / "tools.py": "drains a tool's two pipes against a deadline",
    HARNESS / "measure" / "kmsg.py": "reads /dev/kmsg, where each read() is one record",
}


def lock_primitives(source: str) -> list[tuple[int, str]]:
    """(line, what) of each way to take a file lock: importing fcntl or filelock, or
    os.lockf."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if a.name.split(".")[0] in LOCK_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module \
                and node.module.split(".")[0] in LOCK_MODULES:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Attribute) and node.attr == "lockf":
            found.append((node.lineno, "lockf"))
    return found


def descriptor_read_loops(source: str) -> list[int]:
    """Lines of each `while` loop that reads a descriptor (os.read, os.readv) in its test
    or its body."""
    lines = []
    for loop in ast.walk(ast.parse(source)):
        if isinstance(loop, ast.While) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("read", "readv") and isinstance(n.func.value, ast.Name)
                and n.func.value.id == "os" for n in ast.walk(loop)):
            lines.append(loop.lineno)
    return lines


def test_every_lock_is_taken_through_the_one_primitive() -> None:
    """The GPU and night locks, refinalize, image pins, the model cache and the perf log
    all lock through harness/base/flock.py: a second mechanism is a second set of rules
    for symlinks, FIFOs and timeouts in a shared lock folder."""
    found = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in _sources() if p != FLOCK
             for line, what in lock_primitives(p.read_text(encoding="utf-8"))]
    assert not found, "lock through harness.base.flock:\n" + "\n".join(found)


def test_the_lock_check_would_see_a_lock() -> None:
    assert lock_primitives(FLOCK.read_text(encoding="utf-8"))
    assert [w for _, w in lock_primitives(
        "import fcntl\nfrom filelock import FileLock\nos.lockf(fd, 1, 0)\n")] == [
        "fcntl", "filelock", "lockf"]


def test_bounded_reads_of_a_descriptor_go_through_the_one_reader() -> None:
    """"At most N bytes of this file" is harness/base/readfile.py's `read_fd`, whoever
    opened the file; only loops that are another idea (see STREAM_LOOPS) read a
    descriptor themselves."""
    found = [f"{p.relative_to(ROOT)}:{line}" for p in _sources()
             if p != READFILE and p not in STREAM_LOOPS
             for line in descriptor_read_loops(p.read_text(encoding="utf-8"))]
    assert not found, "read at most N bytes with harness.base.readfile.read_fd:\n" + "\n".join(
        found)
    assert all(descriptor_read_loops(p.read_text(encoding="utf-8")) for p in STREAM_LOOPS), \
        "a stream loop is gone: drop it from STREAM_LOOPS"


def test_the_read_loop_check_would_see_a_loop() -> None:
    assert descriptor_read_loops(READFILE.read_text(encoding="utf-8"))
    assert descriptor_read_loops("while len(d) < n:\n    d += os.read(fd, n)\n") == [1]
    assert descriptor_read_loops("data = os.read(fd, n + 1)\n") == []

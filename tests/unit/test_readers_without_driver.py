"""A night is evidence: every reader (status, reports, bundles, the hook) loads without the
driver that wrote it, so reading a night folder never depends on the code that drives one.

`lint-imports` (contract `readers-read-evidence`) holds the static imports; this imports
every module under harness/readers in a fresh interpreter and fails naming the first one
whose import brought any `harness.driver` module in, however it was imported.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import harness.readers

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import importlib, json, sys
found = {}
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
    driver = sorted(m for m in sys.modules if m.split(".")[:2] == ["harness", "driver"])
    if driver:
        found[name] = driver
        break
print(json.dumps(found))
"""


def _reader_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(harness.readers.__path__,
                                                        "harness.readers."))


def test_the_probe_sees_every_reader() -> None:
    """Not vacuous: status, the report of a night and the bundle's night reader are walked."""
    names = _reader_modules()
    assert {"harness.readers.statuslines", "harness.readers.report.nights",
            "harness.readers.bundle.nightruns", "harness.readers.report.unrun"} <= set(names)


def test_no_reader_loads_the_driver() -> None:
    names = _reader_modules()
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(names)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {}

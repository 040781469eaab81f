"""`make bench` is not run by `make test`, so its imports of harness names (many inside
functions) are checked here: a module moved by a refactor must not break the benchmarks."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_every_harness_name_the_benchmarks_import_exists() -> None:
    missing = []
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness"):
                module = importlib.import_module(node.module)
                missing += [f"{path.name}:{node.lineno}: {node.module}.{a.name}"
                            for a in node.names if not hasattr(module, a.name)
                            and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("harness"):
                        importlib.import_module(a.name)
    assert missing == [], "\n".join(missing)

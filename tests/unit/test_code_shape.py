"""The shape the code is kept in: modules under ~400 lines, functions under ~60.

Small units are what lets a newcomer read one stage, one rule, one writer on its own; a
module or function that outgrows the bound is split, not exempted.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "harness"
MODULE_LINES = 400
FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_over_the_bound() -> None:
    long = [f"{p.relative_to(ROOT.parent)}: {n} lines" for p in _sources()
            if (n := len(p.read_text().splitlines())) > MODULE_LINES]
    assert long == [], "\n".join(long)


def test_no_function_over_the_bound() -> None:
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: "
                                f"{node.name} is {n} lines")
    assert long == [], "\n".join(long)

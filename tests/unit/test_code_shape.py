"""The shape the code is kept in: functions under ~60 lines.

A small function is what lets a newcomer read one stage, one rule, one writer on its own.
Modules have no line bound: a module holds one idea and is split where ideas split
(docs/architecture.md), never at a count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "harness"
FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


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

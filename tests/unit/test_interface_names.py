"""The host/container interface: every name both sides use is spelled once, in
`harness/instrument/harness_observer/interface.py`, which imports nothing at all."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.instrument.harness_observer import interface

ROOT = Path(__file__).resolve().parents[2] / "harness"
CONTRACT = ROOT / "instrument" / "harness_observer" / "interface.py"
# The same word used for something else (checked by hand, kept short).
ELSEWHERE = {("harness/measure/vector.py", "observations"): "the mount's role label in the vector"}


def _names() -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in vars(interface).items():
        if key.isupper() and isinstance(value, str):
            out[value] = key
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_the_contract_imports_nothing_so_any_python_can_load_it() -> None:
    tree = ast.parse(CONTRACT.read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [getattr(n, "module", None) for n in imports] == ["__future__"]


def test_no_module_spells_a_contract_name_itself() -> None:
    names = _names()
    assert "HARNESS_OBSERVATIONS_DIR" in names and "/harness/out" in names
    spelled = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == CONTRACT:
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docs and node.value in names
                    and (str(path.relative_to(ROOT.parent)), node.value) not in ELSEWHERE):
                spelled.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: "
                               f"{node.value!r} is contract.{names[node.value]}")
    assert spelled == [], "\n".join(spelled)

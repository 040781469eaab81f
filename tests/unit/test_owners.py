"""One owner each (docs/architecture.md): each of these fails when a second one appears.

The status words, the reader of a reason's text, the name alphabet (run ids, safe names),
the lock primitive, the campaign loop and the folder tree's layers each have one home; a
second spelling elsewhere is how two parts of the harness drift apart, so it is refused
here with the file and line named.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from harness.base.states import State, Status, Verdict

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
INSTRUMENT = HARNESS / "instrument"  # runs in the container, on the standard library alone
STATES = HARNESS / "base" / "states.py"
REASON = HARNESS / "base" / "reason.py"
CATALOGUE = HARNESS / "base" / "catalogue.py"
NAMES = HARNESS / "base" / "names.py"
LAYERS = {"base", "config", "measure", "judge", "probe", "pipeline", "driver", "readers", "cli",
          "instrument", "data"}
STATUS_WORDS = frozenset({*(s.value for s in Status), *(s.value for s in State),
                          *(v.value for v in Verdict)}) - {"running"}  # docker's word too
ALPHABET = re.compile(r"\[A-Za-z0-9\]\[A-Za-z0-9(?:\._-|_\.-|\.-_)")


def _sources() -> Iterator[Path]:
    for p in sorted(HARNESS.rglob("*.py")):
        if "__pycache__" not in p.parts and INSTRUMENT not in p.parents:
            yield p


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _keys(tree: ast.AST) -> set[int]:
    """Constants used as a field's name, not as a value: dict keys, subscripts, the key of
    a `.get()`, a UI event's kind (`ui.event("interrupted", ...)`)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found |= {id(k) for k in node.keys if k is not None}
        elif isinstance(node, ast.Subscript):
            found.add(id(node.slice))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault", "event") and node.args):
            found.add(id(node.args[0]))
    return found


def status_literals(source: str) -> list[tuple[int, str]]:
    """(line, word) of each string constant that is a status, state or verdict word used
    as a value."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _keys(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value in STATUS_WORDS and id(n) not in skip]


def test_status_words_are_spelled_only_in_the_states_module() -> None:
    found = [f"{p.relative_to(ROOT)}:{line}: {word!r}" for p in _sources() if p != STATES
             for line, word in status_literals(p.read_text())]
    assert found == [], ("use harness.base.states (Status, State, Verdict, StageResult):\n"
                         + "\n".join(found))


def test_the_status_check_would_see_a_literal() -> None:
    assert status_literals('x = "refused"\nif s == "timed-out": pass\n') == [
        (1, "refused"), (2, "timed-out")]
    assert status_literals('d = {"interrupted": 1}\nd["failed"]\nd.get("accepted")\n') == []


def test_only_the_reason_module_reads_a_reasons_text() -> None:
    """The rule-id shape is matched against text only where a stored reason is read
    (`Reason.of`); no code tests a reason's text for a prefix such as "ENV-"."""
    found = []
    for p in _sources():
        text = p.read_text()
        if p not in (REASON, CATALOGUE) and "RULE_SHAPE" in text:
            found.append(f"{p.relative_to(ROOT)}: uses RULE_SHAPE")
        found += [f"{p.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
                  for m in re.finditer(r"startswith\(\s*[\"'][A-Z]+-[\"']", text)]
    assert found == [], "\n".join(found)


def test_the_name_alphabet_is_spelled_once() -> None:
    """Run ids, safe names and the names a bundle, a journal or Slurm carry share one
    alphabet, built by harness.base.names.pattern()."""
    found = []
    for p in _sources():
        if p == NAMES:
            continue
        tree = ast.parse(p.read_text())
        prose = _docstrings(tree)
        found += [f"{p.relative_to(ROOT)}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and id(n) not in prose and ALPHABET.search(n.value)]
    assert found == [], "build name patterns with harness.base.names:\n" + "\n".join(found)


def test_no_class_name_is_defined_twice() -> None:
    seen: dict[str, list[str]] = {}
    for p in _sources():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(str(p.relative_to(HARNESS)))
    twice = {name: where for name, where in seen.items() if len(where) > 1}
    assert twice == {}, f"two types with one name: {twice}"


def test_the_folder_tree_is_the_layers() -> None:
    """Only the entry points sit at the package root; every module lives in its layer."""
    root_modules = sorted(p.name for p in HARNESS.glob("*.py")
                          if p.name not in ("__init__.py", "__main__.py"))
    folders = sorted(p.name for p in HARNESS.iterdir()
                     if p.is_dir() and p.name != "__pycache__")
    assert root_modules == []
    assert set(folders) <= LAYERS, sorted(set(folders) - LAYERS)


def test_one_campaign_loop_asks_the_one_stop_policy() -> None:
    calls = [f"{p.relative_to(ROOT)}:{i}" for p in _sources()
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\bstop_reason\(", line) and not line.lstrip().startswith("def ")]
    assert len(calls) == 1, calls

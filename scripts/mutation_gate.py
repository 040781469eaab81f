"""The checks around a mutmut run that mutmut itself does not make (scripts/mutation.sh).

`selection`, before the run: every module `[tool.mutmut] only_mutate` matches must be
imported by at least one test file in `pytest_add_cli_args_test_selection`. mutmut maps each
mutant to the selected tests that call its function and marks the rest "no tests"; a
module none of the selected files imports is judged by accident (through another module's
tests) or not at all, and the score then says nothing about it.

`score`, after the run: the kill score over mutmut's results, failing on any "no tests"
mutant and on a stale justification. A mutant may be left alive only when it is
equivalent (no behaviour can tell it from the original) and listed, with its reason, in the
justification file; it then leaves the denominator, and the kill line says how many did.
A listed mutant that no longer exists or is now killed fails the run, so the list cannot
outlive the code it speaks for; one that timed out is inconclusive (an equivalent mutant
changes nothing, so only a loaded machine makes its tests slow) and stays left out. The
kill line keeps the exact prefix `mutation: killed K/T = S%` that the gate judge
(harness/judge/gaterecord/onegate.py) parses.

Standard library only: it runs before anything else is trusted.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import math
import os
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The kv-warmup campaign's `min_kill_score`: the floor when none is given.
DEFAULT_FLOOR = 95.0
EQUIVALENT = "scripts/mutation-equivalent.txt"
KILLED = ("killed", "timeout")


# --- selection -----------------------------------------------------------------------------


def mutmut_config(pyproject: Path) -> dict:
    with pyproject.open("rb") as handle:
        return tomllib.load(handle).get("tool", {}).get("mutmut", {})


def mutated_files(root: Path, config: dict) -> list[str]:
    """The source files mutmut mutates, matched as mutmut does (fnmatch on the path relative
    to the project, under each of `source_paths`)."""
    only = config.get("only_mutate", [])
    skip = config.get("do_not_mutate", [])
    found = []
    for source in config.get("source_paths", ["."]):
        for path in sorted((root / source).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if only and not any(fnmatch.fnmatch(rel, p) for p in only):
                continue
            if any(fnmatch.fnmatch(rel, p) for p in skip):
                continue
            found.append(rel)
    return found


def has_functions(path: Path) -> bool:
    """mutmut 3 mutates only inside functions and methods: a module without any (a package's
    docstring-only `__init__.py`) yields no mutant and needs no test."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(tree))


def module_name(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def selected_test_files(root: Path, config: dict) -> list[Path]:
    """The test files of the selection: each entry that names a file (a `::test` suffix is
    cut) or a folder (its `test_*.py` and `*_test.py`); pytest options are not paths."""
    files = []
    for entry in config.get("pytest_add_cli_args_test_selection", []):
        if entry.startswith("-"):
            continue
        path = root / entry.split("::", 1)[0]
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.py")
                            if p.name.startswith("test_") or p.name.endswith("_test.py"))
        elif path.is_file():
            files.append(path)
    return files


def imported_modules(path: Path) -> set[str]:
    """Every module a test file imports, at any depth (a function-level import counts):
    `import a.b` gives `a.b`; `from a.b import c` gives `a.b` and `a.b.c`, since `c` may
    be a submodule (`from harness.judge.finalize import observed`)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@dataclass
class Selection:
    problems: list[str] = field(default_factory=list)
    #: module -> the selected test files that import it
    covered: dict[str, list[str]] = field(default_factory=dict)


def check_selection(root: Path, pyproject: Path | None = None) -> Selection:
    config = mutmut_config(pyproject or root / "pyproject.toml")
    result = Selection()
    for entry in config.get("pytest_add_cli_args_test_selection", []):
        if not entry.startswith("-") and not (root / entry.split("::", 1)[0]).exists():
            result.problems.append(f"the test selection names {entry}, which does not exist")
    tests = {p.relative_to(root).as_posix(): imported_modules(p)
             for p in selected_test_files(root, config)}
    files = mutated_files(root, config)
    if not files:
        result.problems.append("only_mutate matches no source file: nothing would be mutated")
    for rel in files:
        if not has_functions(root / rel):
            continue
        module = module_name(rel)
        importers = [test for test, names in tests.items() if module in names]
        result.covered[module] = importers
        if not importers:
            result.problems.append(
                f"{rel} ({module}) is mutated but no selected test file imports it: add its "
                "tests to [tool.mutmut] pytest_add_cli_args_test_selection")
    return result


# --- score ---------------------------------------------------------------------------------


def read_results(path: Path) -> dict[str, str]:
    """`mutmut results --all true`: one `    name: state` line per mutant."""
    rows = {}
    for line in path.read_text("utf-8").splitlines():
        if ": " in line:
            name, state = line.strip().rsplit(": ", 1)
            rows[name] = state
    return rows


def read_equivalent(path: Path) -> tuple[dict[str, str], list[str]]:
    """The justification file: `NAME  REASON` per line, `#` comments and blank lines
    ignored. A name without a reason is a problem, as is a name listed twice."""
    reasons: dict[str, str] = {}
    problems = []
    if not path.exists():
        return reasons, problems
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        where = f"{path.name}:{number}"
        if not reason.strip():
            problems.append(f"{where}: {name} has no reason: say why it is equivalent")
        elif name in reasons:
            problems.append(f"{where}: {name} is listed twice")
        else:
            reasons[name] = reason.strip()
    return reasons, problems


@dataclass
class Score:
    killed: int
    total: int
    mutants: int
    states: dict[str, int]
    equivalent: dict[str, str]
    problems: list[str]
    alive: list[tuple[str, str]]

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.total if self.total else 0.0

    @property
    def shown(self) -> str:
        """The percent rounded down to one decimal: 1991/1992 reads 99.9%, never 100.0%."""
        return f"{math.floor(self.percent * 10) / 10:.1f}%"

    def line(self, equivalent_file: str = EQUIVALENT) -> str:
        note = f"{self.mutants} mutants"
        if self.equivalent:
            note += f", {len(self.equivalent)} equivalent left out, justified in {equivalent_file}"
        return (f"mutation: killed {self.killed}/{self.total} = {self.shown} "
                f"({note}; {self.states})")


def score(results: dict[str, str], equivalent: dict[str, str],
          problems: list[str] | None = None) -> Score:
    problems = list(problems or [])
    justified = {}
    for name, reason in equivalent.items():
        state = results.get(name)
        if state is None:
            problems.append(f"stale justification: {name} is no longer a mutant; remove it "
                            f"from {EQUIVALENT}")
        elif state == "timeout":
            # an equivalent mutant changes no behaviour, so its tests ran slow (a loaded
            # machine), not differently: inconclusive, neither a kill nor a stale entry
            justified[name] = f"{reason} (timed out this run: inconclusive)"
        elif state != "survived":
            problems.append(f"stale justification: {name} is now '{state}', not survived; "
                            f"remove it from {EQUIVALENT}")
        else:
            justified[name] = reason
    no_tests = sorted(name for name, state in results.items() if state == "no tests")
    if no_tests:
        problems.append(f"{len(no_tests)} mutants have no selected test that runs their "
                        f"function, e.g. {', '.join(no_tests[:5])}")
    states = dict(sorted(Counter(results.values()).items()))
    alive = sorted((name, state) for name, state in results.items()
                   if state not in KILLED and name not in justified)
    killed = sum(1 for name, state in results.items()
                 if state in KILLED and name not in justified)
    return Score(killed=killed, total=len(results) - len(justified), mutants=len(results),
                 states=states, equivalent=justified, problems=problems, alive=alive)


# --- command line --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mutation_gate.py", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--pyproject", type=Path, help="default: ROOT/pyproject.toml")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("selection", help="every mutated module has a selected test importing it")
    scoring = commands.add_parser("score", help="the kill score over mutmut's results")
    scoring.add_argument("results", type=Path)
    scoring.add_argument("--floor", type=float,
                         default=float(os.environ.get("MUTATION_FLOOR") or DEFAULT_FLOOR))
    scoring.add_argument("--equivalent", type=Path, help=f"default: ROOT/{EQUIVALENT}")
    args = parser.parse_args(argv)

    if args.command == "selection":
        selection = check_selection(args.root, args.pyproject)
        for problem in selection.problems:
            print(f"mutation: {problem}", file=sys.stderr)
        if selection.problems:
            return 1
        print(f"mutation: {len(selection.covered)} mutated modules, each imported by a "
              "selected test file")
        return 0

    reasons, problems = read_equivalent(args.equivalent or args.root / EQUIVALENT)
    result = score(read_results(args.results), reasons, problems)
    for name, state in result.alive:
        print(f"  {state}: {name}")
    for name, reason in sorted(result.equivalent.items()):
        print(f"  equivalent: {name}: {reason}")
    for problem in result.problems:
        print(f"mutation: {problem}", file=sys.stderr)
    print(result.line())
    if result.problems or not result.total:
        return 1
    if result.percent < args.floor:
        print(f"mutation: {result.shown} is under the floor of {args.floor:g}%",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

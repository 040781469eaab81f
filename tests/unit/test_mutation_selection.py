"""The mutation gate's own checks (scripts/mutation_gate.py), without running mutmut.

A mutated module that no selected test file imports would be scored by accident or marked
"no tests"; a justified equivalent must still exist and still survive; the kill line must
read, to the gate judge, as exactly the score the script decided on. Each is checked here
against the real pyproject and against small projects built in a temp folder."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.judge.gaterecord.onegate import kill_score

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutation_gate.py"


@pytest.fixture(scope="module")
def gate():
    spec = importlib.util.spec_from_file_location("mutation_gate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def project(tmp_path: Path, files: dict[str, str], selection: list[str],
            only: str = '["pkg/*.py"]') -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.mutmut]\nsource_paths = ["pkg"]\nonly_mutate = {only}\n'
        f"pytest_add_cli_args_test_selection = {selection!r}\n".replace("'", '"'))
    return tmp_path


FUNC = "def f(x):\n    return x + 1\n"


# --- selection -----------------------------------------------------------------------------


def test_the_real_selection_covers_every_mutated_module(gate) -> None:
    result = gate.check_selection(ROOT)
    assert result.problems == []
    mutated = {gate.module_name(rel) for rel in gate.mutated_files(ROOT, gate.mutmut_config(
        ROOT / "pyproject.toml")) if gate.has_functions(ROOT / rel)}
    assert "harness.judge.finalize.attribute" in mutated
    assert "harness.judge.finalize.rules" in mutated
    assert set(result.covered) == mutated
    assert all(result.covered.values())


def test_a_mutated_module_without_a_selected_test_fails_naming_it(gate, tmp_path, capsys) -> None:
    # The real sources and tests, with every test file that imports the per-process judge
    # left out of the selection.
    config = gate.mutmut_config(ROOT / "pyproject.toml")
    importers = gate.check_selection(ROOT).covered["harness.judge.finalize.processes"]
    selection = [t for t in config["pytest_add_cli_args_test_selection"] if t not in importers]
    assert len(selection) < len(config["pytest_add_cli_args_test_selection"])
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[tool.mutmut]\nsource_paths = ["harness"]\n'
        f"only_mutate = {config['only_mutate']!r}\n"
        f"pytest_add_cli_args_test_selection = {selection!r}\n".replace("'", '"'))
    result = gate.check_selection(ROOT, pyproject)
    # exactly the modules whose every selected test was among those left out
    covered = gate.check_selection(ROOT).covered
    orphaned = {m for m, files in covered.items() if set(files) <= set(importers)}
    assert "harness.judge.finalize.processes" in orphaned
    assert len(result.problems) == len(orphaned)
    for module in orphaned:
        path = module.replace(".", "/") + ".py"
        assert [p for p in result.problems if p.startswith(f"{path} ({module})")], module
    assert gate.main(["--pyproject", str(pyproject), "selection"]) == 1
    assert "harness.judge.finalize.processes" in capsys.readouterr().err
    assert gate.main(["selection"]) == 0


def test_imports_are_followed_at_any_depth_and_through_the_package(gate, tmp_path) -> None:
    root = project(tmp_path, {
        "pkg/__init__.py": '"""docstring only: nothing to mutate"""\n',
        "pkg/a.py": FUNC, "pkg/b.py": FUNC, "pkg/c.py": FUNC, "pkg/d.py": FUNC,
        "tests/test_one.py": """
            import pkg.a
            from pkg import b as renamed

            def test_x():
                from pkg.c import f
                assert f and pkg.a and renamed
            """,
        "tests/test_two.py": '"""pkg.d is named here, never imported"""\nfrom . import d\n',
    }, ["tests/test_one.py", "tests/test_two.py::test_x"])
    result = gate.check_selection(root)
    assert sorted(result.covered) == ["pkg.a", "pkg.b", "pkg.c", "pkg.d"]  # not the __init__
    assert result.covered["pkg.b"] == ["tests/test_one.py"]
    assert [p.split(" ")[0] for p in result.problems] == ["pkg/d.py"]


def test_a_package_init_with_functions_needs_its_own_import(gate, tmp_path) -> None:
    root = project(tmp_path, {"pkg/__init__.py": FUNC, "pkg/a.py": FUNC,
                              "tests/test_a.py": "from pkg.a import f\n"}, ["tests"])
    assert [p.split(" ")[0] for p in gate.check_selection(root).problems] == ["pkg/__init__.py"]
    (root / "tests/test_a.py").write_text("import pkg\nfrom pkg.a import f\n")
    assert gate.check_selection(root).problems == []


def test_a_missing_test_file_or_an_empty_match_fails(gate, tmp_path) -> None:
    root = project(tmp_path, {"pkg/a.py": FUNC, "tests/test_a.py": "import pkg.a\n"},
                   ["tests/test_a.py", "tests/test_gone.py", "-x"])
    assert gate.check_selection(root).problems == [
        "the test selection names tests/test_gone.py, which does not exist"]
    root = project(tmp_path, {}, ["tests/test_a.py"], only='["pkg/nothing*.py"]')
    assert gate.check_selection(root).problems == [
        "only_mutate matches no source file: nothing would be mutated"]


# --- score ---------------------------------------------------------------------------------


def results_file(tmp_path: Path, rows: dict[str, str]) -> Path:
    path = tmp_path / "results.txt"
    path.write_text("".join(f"    {name}: {state}\n" for name, state in rows.items()))
    return path


ROWS = {f"harness.m.x_f__mutmut_{i}": "killed" for i in range(1, 98)} | {
    "harness.m.x_f__mutmut_98": "timeout", "harness.m.x_g__mutmut_1": "survived",
    "harness.m.x_g__mutmut_2": "survived"}


def run_score(gate, tmp_path, rows, equivalent: str = "", floor: str = "95") -> int:
    (tmp_path / "equivalent.txt").write_text(equivalent)
    return gate.main(["score", str(results_file(tmp_path, rows)), "--floor", floor,
                      "--equivalent", str(tmp_path / "equivalent.txt")])


def test_the_kill_line_is_the_score_the_judge_reads(gate, tmp_path, capsys) -> None:
    assert run_score(gate, tmp_path, ROWS) == 0
    out = capsys.readouterr().out
    assert "  survived: harness.m.x_g__mutmut_1\n" in out  # every survivor is named
    assert kill_score(out) == round(100 * 98 / 100, 2)  # a timeout is a kill
    assert "mutation: killed 98/100 = 98.0% (100 mutants; " in out
    assert run_score(gate, tmp_path, ROWS, floor="98.5") == 1


def test_a_justified_equivalent_leaves_the_denominator_and_says_so(gate, tmp_path, capsys) -> None:
    text = "# comment\n\nharness.m.x_g__mutmut_1 the branch it flips returns the same value\n"
    assert run_score(gate, tmp_path, ROWS, text) == 0
    out = capsys.readouterr().out
    assert kill_score(out) == round(100 * 98 / 99, 2)
    assert "killed 98/99 = 98.9% (100 mutants, 1 equivalent left out, justified in " in out
    assert "  equivalent: harness.m.x_g__mutmut_1: the branch it flips returns" in out
    assert "  survived: harness.m.x_g__mutmut_2\n" in out
    assert "survived: harness.m.x_g__mutmut_1\n" not in out


def test_a_justified_equivalent_that_timed_out_is_inconclusive_not_stale(
        gate, tmp_path, capsys) -> None:
    """Seen in CI on a loaded machine: an equivalent mutant's tests ran past mutmut's
    timeout. It is neither a kill (it changes nothing) nor a reason to drop the entry."""
    rows = ROWS | {"harness.m.x_g__mutmut_1": "timeout"}
    text = "harness.m.x_g__mutmut_1 the branch it flips returns the same value\n"
    assert run_score(gate, tmp_path, rows, text, floor="98.9") == 0
    out = capsys.readouterr().out
    assert "killed 98/99 = 98.9% (100 mutants, 1 equivalent left out" in out
    assert "harness.m.x_g__mutmut_1: the branch it flips returns the same value (timed out" in out


@pytest.mark.parametrize(("line", "why"), [
    ("harness.m.x_f__mutmut_3 was equivalent once", "is now 'killed', not survived"),
    ("harness.m.x_gone__mutmut_1 was equivalent once", "is no longer a mutant"),
    ("harness.m.x_g__mutmut_1", "has no reason"),
    ("harness.m.x_g__mutmut_1 a\nharness.m.x_g__mutmut_1 b", "is listed twice"),
])
def test_a_stale_or_unexplained_justification_fails(gate, tmp_path, capsys, line, why) -> None:
    assert run_score(gate, tmp_path, ROWS, line + "\n", floor="0") == 1
    assert why in capsys.readouterr().err


def test_a_mutant_with_no_tests_fails_whatever_the_score(gate, tmp_path, capsys) -> None:
    rows = ROWS | {"harness.m.x_h__mutmut_1": "no tests"}
    assert run_score(gate, tmp_path, rows, floor="0") == 1
    assert "no selected test that runs their function, e.g. harness.m.x_h__mutmut_1" in (
        capsys.readouterr().err)


def test_the_score_rounds_down_and_an_empty_run_fails(gate, tmp_path, capsys) -> None:
    rows = {f"m.x_f__mutmut_{i}": "killed" for i in range(1999)} | {"m.x_g__mutmut_1": "survived"}
    run_score(gate, tmp_path, rows, floor="0")
    assert "killed 1999/2000 = 99.9% " in capsys.readouterr().out  # never 100.0%
    assert run_score(gate, tmp_path, {}, floor="0") == 1


def test_the_default_floor_is_the_campaigns(gate) -> None:
    campaign = yaml.safe_load((ROOT / "campaigns/kv-warmup-profile.yaml").read_text())
    [mutation] = [g for g in campaign["gates"] if g["run"] == ["bash", "scripts/mutation.sh"]]
    assert mutation["expect"]["min_kill_score"] == gate.DEFAULT_FLOOR


def make_test_commands(**env: str) -> list[str]:
    """The commands `make test` would run, printed and not run (`make -n`)."""
    # under `make test` itself (CI), a nested make would print "Entering directory" lines
    clean = {k: v for k, v in os.environ.items()
             if k not in ("CI", "MUTATION_TIER", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-n", "test",
                          *(f"{k}={v}" for k, v in env.items())],
                         cwd=ROOT, env=clean, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_ci_ends_make_test_with_the_mutation_gate_at_the_campaigns_floor() -> None:
    gate_line = "MUTATION_FLOOR= bash scripts/mutation.sh"  # cleared: the script's default
    ci = make_test_commands(CI="true")
    assert ci[-1] == gate_line
    assert gate_line not in make_test_commands()
    assert make_test_commands(MUTATION_TIER="1")[-1] == gate_line

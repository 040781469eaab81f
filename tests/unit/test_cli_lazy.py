"""The `harness` group loads a command's module only when that command runs, and `--help`
lists every command from its own docstring, read from source, without loading any.

The import checks run a fresh interpreter (this one has imported everything already)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from harness.cli.commands import COMMANDS
from harness.cli.main import cli

REPO = Path(__file__).resolve().parents[2]


def _real(name: str) -> click.Command:
    cmd = cli.get_command(click.Context(cli), name)
    assert cmd is not None
    return cmd


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("limit", [20, 45, 74, 200])
def test_each_listed_line_is_the_commands_own_short_help_at_any_width(name: str,
                                                                      limit: int) -> None:
    listed = cli._listed(click.Context(cli), name)
    assert listed is not _real(name)  # read from source, not imported
    assert listed.get_short_help_str(limit) == _real(name).get_short_help_str(limit)


def _modules_after(argv: list[str]) -> set[str]:
    """The modules a fresh `harness ARGV` has imported when it exits."""
    code = ("import atexit, json, sys\n"
            "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
            "from harness.cli.main import main\n"
            f"main({argv!r})\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    last = r.stderr.strip().splitlines()[-1]
    return set(json.loads(last))


def test_help_lists_every_command_and_imports_none_of_their_modules() -> None:
    r = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True,
                       text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0
    listed = r.stdout.split("Run:", 1)[1].split()
    assert all(name in listed for name in COMMANDS)
    loaded = _modules_after(["--help"])
    command_modules = {target.partition(":")[0] for target in COMMANDS.values()}
    assert not loaded & command_modules
    assert not {"docker", "pydantic", "yaml", "rich"} & loaded


@pytest.mark.parametrize(("argv", "never"), [
    (["check", "--help"], {"docker", "harness.measure.engine", "harness.driver.drive"}),
    (["status", "--help"], {"docker", "pydantic", "harness.driver.night.runner",
                            "harness.driver.drive"}),
    (["show", "--help"], {"docker", "pydantic", "harness.driver.rerun", "harness.driver.drive"}),
])
def test_an_interactive_command_loads_neither_the_engine_client_nor_the_driver(
        argv: list[str], never: set[str]) -> None:
    loaded = _modules_after(argv)
    assert f"harness.cli.{argv[0]}" in loaded  # the command itself did load
    assert not never & loaded

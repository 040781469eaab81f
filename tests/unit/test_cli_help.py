"""What an operator reads first: `harness --help` lists every command once under its task,
each with its whole first sentence, and usage lines say RUN where an id is accepted."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from harness.cli.commands import COMMANDS, SECTIONS
from harness.cli.main import cli


def _help(width: int) -> str:
    r = CliRunner().invoke(cli, ["--help"], terminal_width=width)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("width", [60, 80, 120])
def test_help_groups_every_command_once_by_task_with_whole_summaries(width: int) -> None:
    out = _help(width)
    headings = [line[:-1] for line in out.splitlines() if re.fullmatch(r"[A-Z][a-z ]+:", line)]
    assert headings == ["Options", *SECTIONS]
    listed = [line.split()[0] for line in out.split("\nRun:\n", 1)[1].splitlines()
              if line.startswith("  ") and not line.startswith("    ")]
    assert sorted(listed) == sorted(COMMANDS)
    assert "..." not in out.split("\nRun:\n", 1)[1]
    # the summary's last words are there: wrapped, not cut
    assert "each run's folder and logs." in " ".join(out.split())
    assert listed[:5] == list(SECTIONS["Run"])


@pytest.mark.parametrize(("argv", "usage"), [
    (["show"], "harness show [OPTIONS] RUN|NIGHT"),
    (["verify"], "harness verify [OPTIONS] RUN|NIGHT"),
    (["diff"], "harness diff [OPTIONS] RUN|NIGHT RUN|NIGHT"),
    (["rerun"], "harness rerun [OPTIONS] [RUN]"),
    (["bundle", "export"], "harness bundle export [OPTIONS] RUN|NIGHT..."),
])
def test_usage_lines_say_run_where_an_id_is_accepted(argv: list[str], usage: str) -> None:
    r = CliRunner().invoke(cli, [*argv, "--help"], prog_name="harness")
    assert r.exit_code == 0
    assert r.output.splitlines()[0] == f"Usage: {usage}"
    assert "RUN_DIR" not in r.output.splitlines()[0]

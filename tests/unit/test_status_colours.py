"""Statuses in colour on a terminal, on every surface that prints them, and never where
NO_COLOR is set (no-color.org) or the output is not a terminal. Through the real command,
on a pseudo-terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.terminal import colour_wanted, paint_statuses
from harness.measure.nightfolder.journal import Journal
from tests.unit.bundle_helpers import make_run, seal
from tests.unit.terminal_helpers import on_terminal

REPO = Path(__file__).resolve().parents[2]
RED, GREEN = "\x1b[31m", "\x1b[32m"
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?3[0-7]m")


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What `harness ARGV` writes on a pseudo-terminal's stdout (stderr kept apart)."""
    return on_terminal(argv, {**os.environ, "COLUMNS": "200", **env}, timeout=120)[1]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    make_run(tmp_path / "runs", "rehearsal-echo-20261130T083000Z-00003fa2")  # accepted
    refused = make_run(tmp_path / "runs", "rehearsal-echo-20261130T090000Z-00003fa3")
    text = (refused / "run.json").read_text().replace('"accepted"', '"refused"', 1)
    (refused / "run.json").write_text(text)
    night = tmp_path / "runs" / "nights" / "rehearsal-20261130T083000Z"
    night.mkdir(parents=True)  # status speaks of nights: one whose run was refused
    with Journal.create(night / "journal.sqlite", campaign="rehearsal",
                        campaign_file="c.yaml", plan=[("echo", 0)]) as j:
        row = j.mark_running(j.rows()[0], refused.name, str(refused))
        j.finish(row, "refused", "why")
    seal(refused)
    return tmp_path / "runs"


@pytest.mark.parametrize("argv", [["ls"], ["show", "latest"]], ids=["ls", "show"])
def test_statuses_are_coloured_on_a_terminal_unless_no_color(runs: Path, argv: list[str]) -> None:
    env = {"HARNESS_RUNS_DIR": str(runs), "NO_COLOR": "", "TERM": "xterm"}
    shown = _on_a_terminal(argv, env)
    assert f"{RED}refused" in shown
    if argv == ["ls"]:
        assert f"{GREEN}accepted" in shown
    plain = _on_a_terminal(argv, {**env, "NO_COLOR": "1"})
    assert not COLOUR.search(plain) and "refused" in plain  # bold or dim may stay
    piped = subprocess.run([sys.executable, "-m", "harness", *argv], capture_output=True,
                           text=True, cwd=REPO, env={**os.environ, **env}, timeout=120)
    assert "\x1b[" not in piped.stdout and "refused" in piped.stdout


def test_the_colour_choice_and_the_painter_are_pure() -> None:
    assert colour_wanted("always", None, {"NO_COLOR": "1"}) is True
    assert colour_wanted("never", None, {}) is False
    assert paint_statuses("a refused-probe named accepted-x", True) == \
        "a refused-probe named accepted-x"
    assert paint_statuses("refused: x", True) == f"{RED}refused\x1b[0m: x"
    assert paint_statuses("refused: x", False) == "refused: x"


@pytest.mark.parametrize("command", ["ls", "status", "diff"], ids=["ls", "status", "diff"])
def test_color_always_colours_a_pipe_and_never_a_terminal(runs: Path, command: str) -> None:
    """One `--color` on every command that prints statuses: `always` survives a pipe (click
    would strip the codes otherwise), `never` wins over a terminal."""
    argv = {"ls": ["ls"], "status": ["status", "--runs-dir", str(runs)],
            "diff": ["diff", "@-1", "latest"]}[command]
    env = {**os.environ, "HARNESS_RUNS_DIR": str(runs), "NO_COLOR": ""}
    piped = subprocess.run([sys.executable, "-m", "harness", *argv, "--color", "always"],
                           capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert piped.returncode in (0, 1), piped.stderr
    # a status word the runs folder holds, never one a running container may add
    assert f"{RED}refused" in piped.stdout, piped.stdout
    shown = _on_a_terminal([*argv, "--color", "never"], {**env, "TERM": "xterm"})
    assert not COLOUR.search(shown) and shown.strip()

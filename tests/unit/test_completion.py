"""Shell completion through the lazy command group: the scripts a user sources, command
names from the command table without importing a command, files for file arguments."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.cli.commands import COMMANDS
from harness.cli.main import COMPLETE_VAR


def complete(instruction: str, **env: str) -> subprocess.CompletedProcess:
    """`harness` as a shell's completion function calls it (a fresh process each time)."""
    return subprocess.run([sys.executable, "-m", "harness"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, COMPLETE_VAR: instruction, **env})


@pytest.mark.parametrize(("shell", "mark"), [("bash", "complete -o nosort -F"),
                                             ("zsh", "#compdef harness"),
                                             ("fish", "complete --no-files --command harness")])
def test_the_completion_source_is_produced(shell: str, mark: str) -> None:
    r = complete(f"{shell}_source")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert mark in r.stdout and "_harness_completion" in r.stdout
    assert f"{COMPLETE_VAR}={shell}_complete" in r.stdout


def test_bash_completes_a_command_name() -> None:
    r = complete("bash_complete", COMP_WORDS="harness ni", COMP_CWORD="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["plain,night"]


def test_every_command_is_offered_for_an_empty_word() -> None:
    r = complete("bash_complete", COMP_WORDS="harness ", COMP_CWORD="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [f"plain,{name}" for name in sorted(COMMANDS)]


def test_zsh_gets_the_help_line_harness_help_shows() -> None:
    r = complete("zsh_complete", COMP_WORDS="harness rer", COMP_CWORD="1")
    assert r.returncode == 0, r.stderr
    kind, name, help_text = r.stdout.splitlines()
    assert (kind, name) == ("plain", "rerun")
    summary = "Run RUN's control again as a new attempt, linked both ways to the original."
    assert help_text and summary.startswith(help_text.rstrip(".").rstrip())


def test_completing_a_command_name_imports_no_command() -> None:
    probe = ("import os, sys\n"
             "from harness.cli.main import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith('harness.cli.')"
             " and m.rsplit('.', 1)[1] not in ('main', 'commands')), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=60, env={**os.environ, COMPLETE_VAR: "bash_complete",
                                        "COMP_WORDS": "harness ", "COMP_CWORD": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "[]", r.stderr


def test_file_arguments_and_options_complete() -> None:
    r = complete("bash_complete", COMP_WORDS="harness night campaigns/reh", COMP_CWORD="2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["file,campaigns/reh"]  # bash then completes the file name
    r = complete("bash_complete", COMP_WORDS="harness rerun --dry", COMP_CWORD="2")
    assert r.stdout.split() == ["plain,--dry-run"]
    r = complete("fish_complete", COMP_WORDS="harness run --js", COMP_CWORD="--js")
    offered = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert offered == ["plain,--json-lines", "plain,--json"], offered


def test_a_run_argument_completes_run_ids_from_the_runs_dir(tmp_path) -> None:
    """`harness show rehearsal-g<TAB>`: the run folders of the runs dir (newest first),
    never a link or a folder not named like a run; then file names, a path being a run too."""
    runs = tmp_path / "runs"
    for name in ("ctl-20261201T010000Z-0000aaaa", "ctl-20261202T010000Z-0000bbbb",
                 "other-20261202T010000Z-0000cccc", "nights", "ctl-not-a-run"):
        (runs / name).mkdir(parents=True)
    (runs / "ctl-20261203T010000Z-0000dddd").symlink_to(runs / "nights")
    for command in ("show", "diff", "verify", "rerun"):
        r = complete("bash_complete", COMP_WORDS=f"harness {command} ct", COMP_CWORD="2",
                     HARNESS_RUNS_DIR=str(runs))
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["plain,ctl-20261202T010000Z-0000bbbb",
                                    "plain,ctl-20261201T010000Z-0000aaaa", "file,ct"], command
    r = complete("bash_complete", COMP_WORDS="harness show ", COMP_CWORD="2",
                 HARNESS_RUNS_DIR=str(tmp_path / "missing"))
    assert r.returncode == 0 and r.stdout.split() == ["plain,latest", "file,"], r.stderr
    r = complete("bash_complete", COMP_WORDS="harness show ./ct", COMP_CWORD="2",
                 HARNESS_RUNS_DIR=str(runs))
    assert r.stdout.split() == ["file,./ct"]  # a path: the shell's file names alone

"""Red team: a hostile git repository as the project. Its config must not make git run
a command (filters reached through include/includeIf, worktree config, a `.git` file
pointing at another repository's config, fsmonitor), and the changed paths it reports
(newlines, ESC/OSC sequences, bidi overrides, Unicode line separators) must reach every
display as one inert line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.measure.provenance import git_state
from harness.readers.report.gitline import git_line
from harness.readers.report.inert import inert

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a",
                    *args], check=True, capture_output=True)


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    _git(path, "init", "-q")
    (path / ".gitattributes").write_text("* filter=x\n")
    (path / "f").write_text("one\n")
    _git(path, "add", ".")
    _git(path, "commit", "-qm", "i")
    (path / "f").write_text("two\n")  # a changed file git status would clean through x
    return path


def _filter(marker: Path) -> str:
    return f"[filter \"x\"]\n\tclean = touch {marker}\n\tprocess = touch {marker}\n"


def _refused(state: dict, marker: Path) -> None:
    assert not marker.exists(), "git ran the repository's filter"
    assert state["dirty"] is None and "filter drivers" in state["error"]


def test_a_filter_reached_through_include_path_is_not_run(tmp_path: Path) -> None:
    repo, marker = _repo(tmp_path / "r"), tmp_path / "ran"
    (tmp_path / "inc.cfg").write_text(_filter(marker))
    _git(repo, "config", "include.path", str(tmp_path / "inc.cfg"))
    _refused(git_state(repo), marker)


def test_a_filter_reached_through_include_if_is_not_run(tmp_path: Path) -> None:
    repo, marker = _repo(tmp_path / "r"), tmp_path / "ran"
    (tmp_path / "inc.cfg").write_text(_filter(marker))
    _git(repo, "config", "includeIf.gitdir:/.path", str(tmp_path / "inc.cfg"))
    _refused(git_state(repo), marker)


def test_a_filter_in_the_worktree_config_is_not_run(tmp_path: Path) -> None:
    repo, marker = _repo(tmp_path / "r"), tmp_path / "ran"
    _git(repo, "config", "extensions.worktreeConfig", "true")
    _git(repo, "config", "--worktree", "filter.x.clean", f"touch {marker}")
    _refused(git_state(repo), marker)


def test_an_upper_case_filter_section_is_not_run(tmp_path: Path) -> None:
    repo, marker = _repo(tmp_path / "r"), tmp_path / "ran"
    with (repo / ".git" / "config").open("a") as f:
        f.write(_filter(marker).replace("[filter", "[FILTER"))
    _refused(git_state(repo), marker)


def test_a_dot_git_file_pointing_at_another_repository_is_checked_there(
        tmp_path: Path) -> None:
    other, marker = _repo(tmp_path / "other"), tmp_path / "ran"
    _git(other, "config", "filter.x.clean", f"touch {marker}")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {other / '.git'}\n")
    (tree / ".gitattributes").write_text("* filter=x\n")
    (tree / "f").write_text("three\n")
    _refused(git_state(tree), marker)


def test_fsmonitor_and_hooks_in_the_repository_config_are_not_run(tmp_path: Path) -> None:
    repo, marker = _repo(tmp_path / "r"), tmp_path / "ran"
    (repo / ".gitattributes").unlink()
    _git(repo, "config", "core.fsmonitor", f"touch {marker}; false")
    _git(repo, "config", "core.hooksPath", str(tmp_path))
    (tmp_path / "post-index-change").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (tmp_path / "post-index-change").chmod(0o755)
    state = git_state(repo)
    assert not marker.exists() and state["dirty"] is True and state["error"] is None


HOSTILE = ["new\nline", "esc\x1b[2J", "osc\x1b]8;;x\x07link", "bidi\u202etxt",
           "sep\u2028line", "para\u2029graph", "nel\x85x"]


def test_hostile_changed_paths_are_recorded_exactly_and_shown_as_one_inert_line(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    (repo / ".gitattributes").unlink()
    for name in HOSTILE:
        (repo / name).write_text("x")
    state = git_state(repo)
    assert state["error"] is None and set(HOSTILE) <= set(state["changed"])
    line = git_line(state, shown=100)
    assert len(line.splitlines()) == 1
    for bad in "\n\x1b\x07\u202e\u2028\u2029\x85":
        assert bad not in line


@pytest.mark.parametrize("char", ["\u2028", "\u2029"])
def test_inert_escapes_unicode_line_separators(char: str) -> None:
    assert inert(f"a{char}b").splitlines() == [inert(f"a{char}b")]
    assert char not in inert(f"a{char}b")

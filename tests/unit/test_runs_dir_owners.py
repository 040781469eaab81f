"""Whose harness.toml sets the runs dir: only one in the current git work tree (its `.git`
and folder the user's or root's), or one the user or root owns that no one else may write,
in a folder no one else may write unless sticky; an unsafe one on the way up is skipped
with a warning naming it and why, and a symlinked one is never followed. Files and folders
are made in tmp_path and given to another uid (65534, nobody) with os.chown, as root."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.config import runsdir

OTHER = 65534  # nobody
ME = os.geteuid()
needs_root = pytest.mark.skipif(ME != 0, reason="giving a file to another uid needs root")

CONFIG_TEXT = 'runs_dir = "chosen-runs"\n'


def _layout(tmp_path: Path, case: str) -> tuple[Path, Path]:
    """`top` (the folder the harness.toml is put in, by `case`) and `start`, two folders
    below it, where the search begins; no `.git` unless the case makes one."""
    top = tmp_path / "top"
    start = top / "proj" / "sub"
    start.mkdir(parents=True)
    config = top / runsdir.CONFIG
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(CONFIG_TEXT)
    if case.startswith("link"):
        os.symlink(elsewhere, config)
        if case == "link to another's file":
            os.chown(elsewhere, OTHER, OTHER)
    elif case == "fifo of another":
        os.mkfifo(config)
        os.chown(config, OTHER, OTHER)
    else:
        config.write_text(CONFIG_TEXT)
        config.chmod(0o644)
    top.chmod(0o755)
    if case in ("file of another", "sticky folder, file of another", "work tree, file of another",
                "planted .git, file of another"):
        os.chown(config, OTHER, OTHER)
    if case == "world-writable file":
        config.chmod(0o666)
    if case == "group-writable file":
        config.chmod(0o664)
    if case == "world-writable folder":
        top.chmod(0o777)
    if case == "group-writable folder":
        top.chmod(0o775)
    if case.startswith("sticky folder"):
        top.chmod(0o1777)
    if case == "folder of another":
        os.chown(top, OTHER, OTHER)
    if case.startswith("work tree"):
        (top / ".git").mkdir()
        if case == "work tree, file of another":
            config.chmod(0o666)
    if case == "planted .git, file of another":
        (top / ".git").mkdir()
        os.chown(top / ".git", OTHER, OTHER)
    return top, start


# (case, obeyed?, the reason a skipped one is named for)
CASES = [
    ("root's file, 0644", True, None),
    ("file of another", False, f"owned by uid {OTHER}"),
    ("world-writable file", False, "writable by its group or by others"),
    ("group-writable file", False, "writable by its group or by others"),
    ("world-writable folder", False, "without the sticky bit"),
    ("group-writable folder", False, "without the sticky bit"),
    ("sticky folder, root's file", True, None),
    ("sticky folder, file of another", False, f"owned by uid {OTHER}"),
    ("folder of another", False, f"its folder is owned by uid {OTHER}"),
    ("link to another's file", False, "a symlink, never followed"),
    ("link to root's file", False, "a symlink, never followed"),
    ("fifo of another", False, f"owned by uid {OTHER}"),
    ("work tree, file of another", True, None),  # a world-writable one, but in your tree
    ("planted .git, file of another", False, f"owned by uid {OTHER}"),
]


@needs_root
@pytest.mark.parametrize(("case", "obeyed", "why"), CASES, ids=[c[0] for c in CASES])
def test_only_a_safe_harness_toml_sets_the_runs_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, obeyed: bool,
        why: str | None) -> None:
    top, start = _layout(tmp_path, case)
    monkeypatch.delenv(runsdir.ENV, raising=False)
    warnings: list[str] = []
    found = runsdir.resolve(None, start, warn=warnings.append)
    if obeyed:
        assert found == runsdir.RunsDir(top / "chosen-runs", str(top / runsdir.CONFIG))
        assert warnings == []
        return
    assert found == runsdir.RunsDir(start / runsdir.DEFAULT, "the default")
    [warning] = warnings
    assert warning.startswith(f"harness: warning: {top / runsdir.CONFIG} not obeyed: ")
    assert why is not None and why in warning


@needs_root
def test_an_unsafe_nearer_file_is_skipped_for_a_safe_one_further_up(tmp_path: Path) -> None:
    top, start = _layout(tmp_path, "root's file, 0644")
    nearer = start.parent / runsdir.CONFIG
    nearer.write_text('runs_dir = "planted"\n')
    os.chown(nearer, OTHER, OTHER)
    found = runsdir.search(start)
    assert found.config == runsdir.ProjectConfig(top / runsdir.CONFIG, "chosen-runs")
    assert found.skipped == (runsdir.Skipped(nearer, f"owned by uid {OTHER}, neither you "
                                                     f"(uid {ME}) nor root"),)


@needs_root
@pytest.mark.parametrize(("owner", "obeyed"), [(1000, True), (OTHER, False), (0, True)])
def test_the_current_users_own_file_is_obeyed_as_roots_is(tmp_path: Path, owner: int,
                                                          obeyed: bool) -> None:
    top, start = _layout(tmp_path, "root's file, 0644")
    os.chown(top / runsdir.CONFIG, owner, owner)
    found = runsdir.search(start, uid=1000)
    assert (found.config is not None) == obeyed
    assert (found.skipped == ()) == obeyed


def test_a_symlink_in_the_work_tree_is_refused_never_followed(tmp_path: Path) -> None:
    top, start = _layout(tmp_path, "link to root's file")
    (top / ".git").mkdir()
    with pytest.raises(InvalidInput, match="is a symlink; give the file itself"):
        runsdir.search(start)


@needs_root
@pytest.mark.parametrize("given", ["option", "environment"])
def test_the_option_and_the_environment_still_come_first_and_search_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    _, start = _layout(tmp_path, "sticky folder, file of another")
    warnings: list[str] = []
    monkeypatch.delenv(runsdir.ENV, raising=False)
    if given == "environment":
        monkeypatch.setenv(runsdir.ENV, "mine")
    found = runsdir.resolve("mine" if given == "option" else None, start, warn=warnings.append)
    assert found.path == start / "mine" and warnings == []


def test_the_pure_judgement_reads_only_modes_and_owners() -> None:
    def st(mode: int, uid: int) -> os.stat_result:
        return os.stat_result((mode, 0, 0, 1, uid, uid, 0, 0, 0, 0))

    folder = st(stat.S_IFDIR | 0o755, 0)
    assert runsdir.unsafe(st(stat.S_IFREG | 0o644, 7), folder, 7) is None
    assert runsdir.unsafe(st(stat.S_IFREG | 0o600, 0), folder, 7) is None
    assert "owned by uid 8" in runsdir.unsafe(st(stat.S_IFREG | 0o644, 8), folder, 7)
    assert runsdir.unsafe(st(stat.S_IFREG | 0o644, 7), st(stat.S_IFDIR | 0o1777, 0), 7) is None
    assert "sticky" in runsdir.unsafe(st(stat.S_IFREG | 0o644, 7),
                                      st(stat.S_IFDIR | 0o777, 0), 7)
    assert "symlink" in runsdir.unsafe(st(stat.S_IFLNK | 0o777, 7), folder, 7)


@needs_root
def test_ls_warns_on_stderr_and_reads_the_default(tmp_path: Path) -> None:
    top, start = _layout(tmp_path, "sticky folder, file of another")
    (top / "chosen-runs").mkdir()
    env = {k: v for k, v in os.environ.items() if k != runsdir.ENV}
    r = subprocess.run([sys.executable, "-m", "harness", "ls"], capture_output=True,
                       text=True, timeout=120, cwd=start, env=env)
    assert r.returncode == 2, r.stdout + r.stderr  # no gpu-runs here: the default's answer
    assert f"harness: warning: {top / runsdir.CONFIG} not obeyed: owned by uid {OTHER}" \
        in r.stderr
    assert f"no such runs dir: {start / runsdir.DEFAULT}" in r.stderr
    assert "Traceback" not in r.stderr

"""`harness init [DIR]`: the thin shell around `harness.config.scaffold`. Each path is
lstat-ed, each file created O_EXCL (never replacing one that appeared meanwhile); `git
init` runs as every harness git call does; it never commits (that is the operator's call).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
from pathlib import Path

import click

from harness.base.atomic import write_text
from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.base.tree import printable
from harness.config import scaffold
from harness.measure.provenance import git_command


def _kind(path: Path) -> scaffold.Kind:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except NotADirectoryError:  # a folder above it is a file: decide names that one
        return "missing"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "other"


def _target(folder: Path) -> Path:
    """DIR as a folder to write into: created when missing (its parent must exist)."""
    if os.path.lexists(folder) and not folder.is_dir():
        raise InvalidInput(f"{folder}: not a folder")
    if not folder.is_dir():
        parent = folder.absolute().parent
        if not parent.is_dir():
            raise InvalidInput(f"{folder}: its parent folder {parent} does not exist "
                               "(init makes DIR, not the folders above it)")
        try:
            folder.mkdir()
        except OSError as e:
            raise InvalidInput(f"{folder}: cannot create it ({e.strerror or e})") from None
    return folder


def _write(root: Path, item: scaffold.ScaffoldFile) -> scaffold.InitStep:
    """Create one file if nothing is there; the step it came to."""
    kinds = {p: _kind(root / p) for p in [*scaffold.parents(item.path), item.path]}
    step = scaffold.decide(item.path, kinds)
    if step.action != "create":
        return step
    try:
        for folder in scaffold.parents(item.path):
            if kinds[folder] == "missing":
                with contextlib.suppress(FileExistsError):  # made meanwhile: looked at below
                    (root / folder).mkdir()
                kinds[folder] = _kind(root / folder)
        step = scaffold.decide(item.path, kinds)
        if step.action == "create":
            write_text(root / item.path, item.text, exclusive=True)
    except FileExistsError:  # something appeared at the name meanwhile: kept, never replaced
        return scaffold.decide(item.path, {**kinds, item.path: _kind(root / item.path)})
    except OSError as e:
        raise InvalidInput(f"{root / item.path}: cannot write it "
                           f"({e.strerror or e})") from None
    return step


def _git_init(folder: Path) -> str:
    """Init a repository in `folder` unless it is inside a work tree already."""
    if shutil.which("git") is None:
        raise EnvironmentFault(f"git not found on PATH: run `git init` in {folder} yourself "
                               "(or give --no-git)")
    rc, out, _ = git_command(folder, "rev-parse", "--show-toplevel")
    if rc == 0 and out.strip():
        top = out.strip().decode("utf-8", "backslashreplace")
        return f"git: {folder} is in the work tree at {printable(top)}; not initialised again"
    rc, _, why = git_command(folder, "init", "-q")
    if rc != 0:
        raise EnvironmentFault(f"git init in {folder} failed: {printable(why)}")
    return f"git: initialised an empty repository in {folder} (nothing committed)"


@click.command("init")
@click.argument("folder", metavar="[DIR]", default=".", type=click.Path(path_type=Path))
@click.option("--no-git", is_flag=True, help="do not run `git init` when DIR is not inside "
              "a git work tree")
def init(folder: Path, no_git: bool) -> None:
    """Start a campaign repository in DIR (default: the current folder).

    Writes harness.toml, .gitignore, a README with the next steps, an empty images.lock,
    and a CPU example and a gfx1100 vLLM control to pin (`harness check` warns, exit 0).
    Never overwrites: whatever is in the way is named and left alone. Creates DIR when
    missing; runs `git init` outside a work tree; never commits.

    Exit 0 when every file is there afterwards; 1 when something in the way kept one from
    being written; 2 bad DIR; 3 git missing or failing.
    """
    root = _target(folder)
    steps = []
    for item in scaffold.files():  # each line as it happens: a later failure keeps them
        steps.append(_write(root, item))
        click.echo(steps[-1].line(printable(str(folder / item.path))))
    if not no_git:
        click.echo(_git_init(root))
    blocked = [s for s in steps if not s.done]
    if blocked:
        raise Refused(f"{len(blocked)} file(s) not written: something else is in the way "
                      "(named above); move it aside and run `harness init` again")
    click.echo("\nNext steps:")
    if folder != Path("."):
        click.echo(f"  cd {shlex.quote(printable(str(folder)))}")
    for line in scaffold.next_steps():
        click.echo(f"  {line}")

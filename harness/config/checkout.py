"""The checkout a command runs from: the git work tree holding the current folder (or the
folder itself outside git). A path named by a record (a rerun's campaign) must lie inside
it, so a forged record cannot make the harness run a campaign from anywhere else."""

from __future__ import annotations

import os
from pathlib import Path


def checkout(cwd: Path | None = None) -> Path:
    """The real top of the git work tree holding `cwd` (default: the current folder), found
    by its `.git` entry without running git; `cwd` itself when none holds it."""
    here = Path(os.path.realpath(cwd or os.getcwd()))
    for folder in (here, *here.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return here


def inside(path: Path, root: Path) -> bool:
    """Is `path`, every symlink resolved, `root` or below it?"""
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents

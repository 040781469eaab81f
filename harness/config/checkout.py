"""Where a campaign's project and checkout are, worked out from the files a command is
given, never from the folder it is typed in: so every command reads and writes the same
places from any folder.

The project of a campaign is the folder above its own (`campaigns/X.yaml`). A path that a
record names (a rerun's campaign) must lie inside the checkout the run belongs to (the git
work tree holding its runs folder, as the operator addressed the run), so a forged record
cannot make the harness run a campaign from anywhere else. A runs folder outside any git
work tree belongs to no checkout: a folder the record's author laid out (an unpacked
archive) must never count as one, so there the current folder's checkout is the
operator's word, as it is for any path they type.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_of(campaign_file: Path) -> Path:
    """The project a campaign belongs to: the folder above its own (campaigns/X.yaml). The
    one rule for where approvals/, the default mount root, the seal's base and the default
    runs dir are."""
    return Path(campaign_file).parent.parent


def work_tree(start: Path) -> Path | None:
    """The real top of the git work tree holding `start`, found by its `.git` entry without
    running git; None when none holds it."""
    here = Path(os.path.realpath(start))
    for folder in (here, *here.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def checkout(start: Path) -> Path:
    """The git work tree holding `start` (real), or `start` itself outside git."""
    return work_tree(start) or Path(os.path.realpath(start))


def of_run(run_dir: Path, cwd: Path | None = None) -> Path:
    """The checkout a run folder belongs to: the git work tree holding its runs folder (a
    run folder is RUNS/<run-id>), taken as the operator addressed it (a link to a run or to
    the runs folder is not followed), so the operator's path decides, never the record
    inside the folder. Outside git, the checkout of `cwd` (default: the current folder)."""
    found = work_tree(Path(os.path.abspath(run_dir)).parent.parent)
    return found or checkout(cwd or Path(os.getcwd()))


def inside(path: Path, root: Path) -> bool:
    """Is `path`, every symlink resolved, `root` or below it?"""
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents

"""Where a campaign's project and checkout are, worked out from the files a command is
given, never from the current folder, so every command finds the same places.

A path a record names must lie inside the checkout holding the run's runs folder, so a
forged record cannot point the harness elsewhere; a runs folder outside git (an unpacked
archive) counts as no checkout, so there the operator's current checkout decides.
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
    """The checkout a run folder belongs to: the git work tree holding its runs folder as
    the operator addressed it (links not followed), never the record inside; outside git,
    the checkout of `cwd`."""
    found = work_tree(Path(os.path.abspath(run_dir)).parent.parent)
    return found or checkout(cwd or Path(os.getcwd()))


def inside(path: Path, root: Path) -> bool:
    """Is `path`, every symlink resolved, `root` or below it?"""
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents

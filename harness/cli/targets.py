"""What a folder or file given on the command line is, when it is not what the command
takes: a night folder where a campaign or a run belongs, a bundle where a run folder
belongs. The message names the command that takes it (papercut 19), instead of "the YAML
file is a folder" or "not a run folder".

A night folder is one holding the night journal (RUNS/nights/<campaign>-<stamp>/
journal.sqlite); a bundle is a .tar, .tar.gz or .tgz file, or an unpacked bag (bagit.txt).
Only names are looked at (lexists): nothing is opened or followed.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.measure.nightfolder.naming import JOURNAL_NAME

BUNDLE_SUFFIXES = (".tar", ".tar.gz", ".tgz")
BAG_DECLARATION = "bagit.txt"


def is_night_folder(path: Path) -> bool:
    """A folder holding a night journal."""
    return os.path.isdir(path) and os.path.lexists(Path(path) / JOURNAL_NAME)


def is_bundle(path: Path) -> bool:
    """A bundle archive (by its name, a file) or an unpacked bag (a folder with bagit.txt)."""
    if os.path.isdir(path):
        return os.path.lexists(Path(path) / BAG_DECLARATION)
    return os.path.lexists(path) and str(path).endswith(BUNDLE_SUFFIXES)


def _quoted(path: Path) -> str:
    return shlex.quote(str(path))[:400]


def refuse_night(path: Path, where: str) -> None:
    """InvalidInput (exit 2) when `path` is a night folder given as `where` (a campaign,
    a run folder): the message says `harness rerun --failed NIGHT_DIR`."""
    if is_night_folder(path):
        raise InvalidInput(f"{str(path)[:400]}: that is a night folder, not {where}: "
                           f"`harness rerun --failed {_quoted(path)} --reason TEXT`?")


def refuse_bundle(path: Path) -> None:
    """InvalidInput (exit 2) when `path` is a bundle given where a run folder belongs."""
    if is_bundle(path):
        raise InvalidInput(f"{str(path)[:400]}: that is a bundle, not a run folder: "
                           f"`harness bundle verify {_quoted(path)}`")

"""A run's `regression` addendum, read back: `addenda/<stamp>-regression/regression.json`.

The folder is hostile: only a real folder named as a regression addendum counts, read as
its own SHA256SUMS vouches after it verifies; one that does not is no call."""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.base.errors import Refused
from harness.base.readfile import InputError
from harness.judge.comparable import ADDENDUM, FILE, SCHEMA
from harness.judge.finalize.documents import DocumentError
from harness.judge.finalize.observed import SealedReader
from harness.measure.runfolder import manifest
from harness.measure.runfolder.layout import ADDENDA

_FOLDER = re.compile(r"[0-9]{8}T[0-9]{6}Z-" + ADDENDUM + r"(-[0-9]{1,2})?")


def read_sealed(run_dir: Path) -> dict | None:
    """The run's newest `regression` addendum, read as its own SHA256SUMS vouches for
    (None when it has none, or it does not verify or is not ours)."""
    try:
        with os.scandir(Path(run_dir) / ADDENDA) as it:
            names = sorted(e.name for e in it if _FOLDER.fullmatch(e.name)
                           and e.is_dir(follow_symlinks=False))
    except OSError:
        return None
    for name in reversed(names):
        folder = Path(run_dir) / ADDENDA / name
        try:
            if manifest.verify_folder(folder):
                continue
            doc = SealedReader(folder).json(FILE)
        except (Refused, InputError, DocumentError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            return doc
    return None

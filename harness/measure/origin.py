"""Which harness is running: a distribution installed from its wheel, or a source checkout.

An operator installs a released harness (a venv, pipx) and keeps campaigns in a repository
of their own, so the harness's own bytes are in no commit of that repository. What vouches
for them then is the distribution's RECORD: pip wrote the sha256 of every file it
installed. `which()` says which of the two this process imports (`Origin`); `record_problems`
is the pure check of the package's files against RECORD (an edited file, a file RECORD does
not list, a listed file gone), the installed counterpart of "committed at commit X"
(`provenance.clean_at` asks it). A harness imported from anywhere else (an editable install,
`PYTHONPATH` on a source tree, a copied folder) is a checkout: git judges it, and a folder
git does not know is dirty.

The mode is decided by where the running package lies, never by what a distribution
claims: a RECORD counts only when the file it lists as `harness/__init__.py` is this very
package's.
"""

from __future__ import annotations

import base64
import csv
import functools
import hashlib
import io
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import harness
from harness.base.tree import printable

PACKAGE_DIR = Path(harness.__file__).resolve().parent
DISTRIBUTION = "harness"
INSTALLED = "installed"  # a wheel's files, vouched for by the distribution's RECORD
CHECKOUT = "checkout"  # a source tree (or anything not installed), vouched for by git
RECORD_LIMIT = 4 * 1024 * 1024  # a RECORD larger than this is not pip's


@dataclass(frozen=True)
class Origin:
    """The running harness: its distribution and version, and where its package lies.

    `location` is the folder holding the `harness` package (site-packages, or the checkout
    top); `record` is RECORD's bytes for an installed distribution (None for a checkout)
    and `record_sha256` their digest: `sha256sum` of that install's RECORD (pip writes it at
    install, adding the console script and bytecode rows to the wheel's own), so it tells
    one install from another; what the harness's bytes are, file by file, is in the source
    seal."""

    distribution: str
    version: str
    mode: str
    location: Path
    record: bytes | None = None

    @property
    def record_sha256(self) -> str | None:
        if self.record is None:
            return None
        return "sha256:" + hashlib.sha256(self.record).hexdigest()

    def as_dict(self) -> dict[str, str | None]:
        """What run.json, a gate record and an approval name of the harness."""
        return {"distribution": self.distribution, "version": self.version, "mode": self.mode,
                "location": str(self.location), "record_sha256": self.record_sha256}


def _ours(dist: metadata.Distribution) -> bool:
    """The distribution's RECORD lists this running package's `harness/__init__.py`."""
    try:
        listed = dist.locate_file("harness/__init__.py")
    except (OSError, ValueError, NotImplementedError):
        return False
    return os.path.realpath(str(listed)) == str(PACKAGE_DIR / "__init__.py") and any(
        f.as_posix() == "harness/__init__.py" for f in dist.files or ())


def _record_bytes(dist: metadata.Distribution) -> bytes | None:
    """RECORD's bytes as pip wrote them (CRLF rows: the text reader would translate them,
    and the digest must be the file's), bounded; None when it cannot be read."""
    for listed in dist.files or ():
        if listed.name == "RECORD" and listed.parent.name.endswith(".dist-info"):
            try:
                with open(dist.locate_file(listed), "rb") as f:
                    data = f.read(RECORD_LIMIT + 1)
            except (OSError, ValueError):
                return None
            return data if len(data) <= RECORD_LIMIT else None
    return None


@functools.lru_cache(maxsize=1)
def which() -> Origin:
    """The running harness's origin (read once a process: the package cannot move while it
    runs). Installed when a distribution on sys.path has a RECORD listing this package;
    a checkout otherwise, located at the package's parent folder."""
    for dist in metadata.distributions(name=DISTRIBUTION):
        data = _record_bytes(dist) if _ours(dist) else None
        if data is not None:
            return Origin(DISTRIBUTION, str(dist.version), INSTALLED, PACKAGE_DIR.parent,
                          data)
    return Origin(DISTRIBUTION, harness.__version__, CHECKOUT, PACKAGE_DIR.parent)


# ---- RECORD: the installed counterpart of "committed" ----------------------------------------

@dataclass(frozen=True)
class RecordRow:
    """One RECORD row: the file's sha256 (hex; None where RECORD gives no hash) and size."""

    sha256: str | None
    size: int | None


def parse_record(text: str) -> dict[str, RecordRow]:
    """Pure: RECORD (CSV rows `path,sha256=<urlsafe base64>,size`, PEP 376/627) as
    path -> RecordRow. A row whose hash is not sha256 reads as unhashed; ValueError for text
    that is not CSV of three fields."""
    out: dict[str, RecordRow] = {}
    for n, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row:
            continue
        if len(row) != 3:
            raise ValueError(f"RECORD line {n}: {len(row)} fields, not 3")
        path, digest, size = row
        algo, _, value = digest.partition("=")
        hexdigest = None
        if algo == "sha256" and value:
            try:
                raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            except ValueError:
                raw = b""
            hexdigest = raw.hex() if len(raw) == 32 else None
        out[path] = RecordRow(hexdigest, int(size) if size.isdigit() else None)
    return out


def record_problems(listed: dict[str, RecordRow], found: dict[str, bytes | None],
                    package: str = "harness/") -> list[str]:
    """Pure: why the package's files (`found`: path as RECORD spells it, e.g.
    `harness/cli/main.py` -> bytes, None when unreadable) are not the files RECORD lists
    ([] when they are). Every file of the package must be listed with its sha256 and hash
    the same; every listed file of the package (bytecode aside) must be there."""
    out = []
    for path, data in sorted(found.items()):
        row = listed.get(path)
        if data is None:
            out.append(f"{path}: unreadable")
        elif row is None:
            out.append(f"{path}: not in the distribution's RECORD (added after install)")
        elif row.sha256 is None:
            out.append(f"{path}: RECORD gives no sha256 for it")
        elif row.sha256 != hashlib.sha256(data).hexdigest():
            out.append(f"{path}: differs from the distribution's RECORD (edited after "
                       "install)")
    for path in sorted(listed):
        if (path.startswith(package) and path not in found and "/__pycache__/" not in path
                and not path.endswith(".pyc")):
            out.append(f"{path}: listed in the distribution's RECORD, missing")
    return out


def describe(doc: dict) -> str:
    """Pure: one line naming a harness as `harness_state` records it (run.json, a gate
    record, an approval, `--version`); values come from files, so each is escaped."""
    def text(key: str) -> str:
        return printable(str(doc.get(key)))[:300]

    name = f"{text('distribution')} {text('version')}"
    if doc.get("mode") == INSTALLED:
        return (f"{name}, installed at {text('location')} (RECORD "
                f"{text('record_sha256')})")
    if doc.get("mode") == CHECKOUT:
        commit = doc.get("commit")
        at = (f" at commit {text('commit')}" + (", dirty" if doc.get("dirty") else "")
              if isinstance(commit, str) else " (git cannot tell its commit)")
        return f"{name}, source checkout {text('location')}{at}"
    return f"{name}, {text('mode')} at {text('location')}"

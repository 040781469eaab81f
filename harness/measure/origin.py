"""Which harness is running: a distribution installed from its wheel, or a source checkout.

An installed harness's bytes are in no commit of the operator's repository; its RECORD
(the sha256 pip wrote of each file) vouches for them instead (`record_problems`). Anything
else (editable install, PYTHONPATH, a copied folder) is a checkout that git judges. The
mode follows where the running package lies, never what a distribution claims."""

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
    """The running harness: its distribution, version, and the folder holding its package.
    `record`: RECORD's bytes when installed (None for a checkout); `record_sha256` tells
    one install from another."""

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
    """RECORD's exact bytes (binary: its digest is the file's), bounded; None when unreadable."""
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
    """The running harness's origin, read once a process (the package cannot move)."""
    for dist in metadata.distributions(name=DISTRIBUTION):
        data = _record_bytes(dist) if _ours(dist) else None
        if data is not None:
            return Origin(DISTRIBUTION, str(dist.version), INSTALLED, PACKAGE_DIR.parent,
                          data)
    return Origin(DISTRIBUTION, harness.__version__, CHECKOUT, PACKAGE_DIR.parent)


@dataclass(frozen=True)
class RecordRow:
    """One RECORD row: the file's sha256 (hex; None where RECORD gives no hash) and size."""

    sha256: str | None
    size: int | None


def parse_record(text: str) -> dict[str, RecordRow]:
    """Pure: RECORD (CSV `path,sha256=<urlsafe base64>,size`) as path -> RecordRow; a non-sha256
    hash reads as unhashed; ValueError for text that is not CSV of three fields."""
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
    """Pure: why the package's files (RECORD path -> bytes, None when unreadable) are not the
    files RECORD lists: each listed with its sha256, each listed one present (bytecode aside)."""
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
    """Pure: one line naming a harness as `harness_state` records it, escaped."""
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

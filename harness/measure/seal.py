"""The source seal: one digest over every byte that defines a run (harness source, inputs).

A run folder's own seal, its SHA256SUMS, is `harness.measure.runfolder.manifest`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from harness.base.hashing import sha256_many
from harness.measure.origin import PACKAGE_DIR
from harness.measure.runfolder.manifest import compare

HARNESS_LABEL = "harness/"  # the label prefix of the harness's own files (origin vouches)


def source_files(project_dir: Path, inputs: list[Path]) -> dict[str, Path]:
    """Label -> path for every byte that defines a run: harness + instrument source, inputs."""
    out: dict[str, Path] = {}
    for p in sorted(_package_files()):
        out[HARNESS_LABEL + p.relative_to(PACKAGE_DIR).as_posix()] = p
    for p in inputs:
        p = Path(os.path.abspath(p))
        out[input_label(project_dir, p)] = p
    return out


def input_label(project_dir: Path, path: Path) -> str:
    """The seal's label of an input file: `input/<path>`, or `input-abs<path>` outside."""
    p = Path(os.path.abspath(path))
    try:
        return "input/" + p.relative_to(project_dir).as_posix()
    except ValueError:
        return "input-abs" + p.as_posix()


def _package_files() -> list[Path]:
    """The package's files without bytecode: os.walk, so __pycache__ is never listed."""
    found = []
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            p = Path(root, name)
            if p.suffix != ".pyc" and p.is_file():
                found.append(p)
    return found


@dataclass(frozen=True)
class SourceSeal:
    digest: str  # "sha256:<hex>"
    files: dict[str, str]  # label -> hex

    def as_dict(self) -> dict:
        return {"seal": self.digest, "files": self.files}


def seal_digest(files: dict[str, str]) -> str:
    """Pure: one digest over sorted `<hex>  <label>` lines."""
    text = "".join(f"{files[k]}  {k}\n" for k in sorted(files))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def source_seal(project_dir: Path, inputs: list[Path]) -> SourceSeal:
    labelled = source_files(project_dir, inputs)
    digests = sha256_many(labelled.values(), follow_symlinks=True)  # operator's own files
    files = {label: digests[path] for label, path in labelled.items()}
    return SourceSeal(seal_digest(files), files)


def seal_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Pure: name each source file that changed, appeared or vanished between two seals."""
    words = {"missing": "removed", "extra": "added", "changed": "changed"}
    return [f"{k}: {words[kind]}" for k, kind in compare(before, after)]


def files_under(folder: Path) -> list[str]:
    """Every regular file below `folder`, sorted; follows symlinks, so never use it for evidence."""
    return sorted((Path(root) / f).relative_to(folder).as_posix()
                  for root, _, files in os.walk(folder) for f in files)

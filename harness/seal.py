"""Seals: the source seal over what defines a run, and the SHA256SUMS manifest of a run folder.

The manifest is `sha256sum -c` format so a reviewer needs only coreutils. Later judgements
are added as addenda, each folder with its own SHA256SUMS, so nothing sealed is rewritten.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from harness.atomic import write_text
from harness.hashing import sha256_file, sha256_many

SUMS = "SHA256SUMS"
ADDENDA = "addenda"
PACKAGE_DIR = Path(__file__).resolve().parent


# ---- source seal -------------------------------------------------------------------------

def source_files(project_dir: Path, inputs: list[Path]) -> dict[str, Path]:
    """Label -> path for every byte that defines a run: harness + instrument source, inputs."""
    out: dict[str, Path] = {}
    for p in sorted(PACKAGE_DIR.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            out["harness/" + p.relative_to(PACKAGE_DIR).as_posix()] = p
    for p in inputs:
        p = Path(os.path.abspath(p))
        try:
            label = "input/" + p.relative_to(project_dir).as_posix()
        except ValueError:
            label = "input-abs" + p.as_posix()
        out[label] = p
    return out


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
    digests = sha256_many(labelled.values())
    files = {label: digests[path] for label, path in labelled.items()}
    return SourceSeal(seal_digest(files), files)


def seal_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Pure: name each source file that changed, appeared or vanished between two seals."""
    out = []
    for k in sorted(set(before) | set(after)):
        if k not in after:
            out.append(f"{k}: removed")
        elif k not in before:
            out.append(f"{k}: added")
        elif before[k] != after[k]:
            out.append(f"{k}: changed")
    return out


# ---- run-folder manifest -----------------------------------------------------------------

def _escape(name: str) -> tuple[str, str]:
    """coreutils' escaping: names with backslash or newline get a leading backslash."""
    if "\\" in name or "\n" in name:
        return "\\", name.replace("\\", "\\\\").replace("\n", "\\n")
    return "", name


def _unescape(name: str) -> str:
    out, i = [], 0
    while i < len(name):
        if name[i] == "\\" and i + 1 < len(name):
            out.append("\n" if name[i + 1] == "n" else name[i + 1])
            i += 2
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def render_sums(digests: dict[str, str]) -> str:
    lines = []
    for name in sorted(digests):
        prefix, esc = _escape(name)
        lines.append(f"{prefix}{digests[name]}  {esc}\n")
    return "".join(lines)


def parse_sums(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if not line:
            continue
        escaped = line.startswith("\\")
        if escaped:
            line = line[1:]
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise ValueError(f"not a sha256sum line: {line[:80]!r}")
        out[_unescape(name) if escaped else name] = digest
    return out


def files_under(folder: Path) -> list[str]:
    """Every regular file below `folder`, as sorted relative POSIX paths."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for f in files:
            out.append((Path(root) / f).relative_to(folder).as_posix())
    return sorted(out)


def write_manifest(folder: Path, *, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """Hash every file below `folder` (except SHA256SUMS and `exclude` prefixes) and write
    SHA256SUMS last. Returns the digests."""
    names = [n for n in files_under(folder)
             if n != SUMS and not any(n == e or n.startswith(e + "/") for e in exclude)]
    digests = sha256_many(folder / n for n in names)
    sums = {n: digests[folder / n] for n in names}
    write_text(folder / SUMS, render_sums(sums), exclusive=True, mode=0o444)
    return sums


def make_read_only(folder: Path) -> None:
    for root, _dirs, files in os.walk(folder):
        for f in files:
            p = Path(root) / f
            p.chmod(stat.S_IMODE(p.lstat().st_mode) & ~0o222)
        Path(root).chmod(stat.S_IMODE(Path(root).stat().st_mode) & ~0o222)


@dataclass(frozen=True)
class Problem:
    path: str
    kind: str  # changed | missing | extra | unreadable | no-manifest

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}"


def verify_folder(folder: Path) -> list[Problem]:
    """Re-hash a sealed run folder: its SHA256SUMS plus every addendum's own SHA256SUMS.

    Every file must be claimed by exactly one manifest and match it.
    """
    manifests = [SUMS] + [f for f in files_under(folder)
                          if f.startswith(ADDENDA + "/") and f.endswith("/" + SUMS)]
    if not (folder / SUMS).is_file():
        return [Problem(SUMS, "no-manifest")]
    claimed: dict[str, str] = {}
    problems: list[Problem] = []
    for m in manifests:
        base = m[: -len(SUMS)]
        try:
            entries = parse_sums((folder / m).read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            problems.append(Problem(m, "unreadable"))
            continue
        for name, digest in entries.items():
            claimed[base + name] = digest
    present = set(files_under(folder)) - set(manifests)
    for name in sorted(set(claimed) | present):
        if name not in present:
            problems.append(Problem(name, "missing"))
        elif name not in claimed:
            problems.append(Problem(name, "extra"))
        else:
            try:
                if sha256_file(folder / name) != claimed[name]:
                    problems.append(Problem(name, "changed"))
            except OSError:
                problems.append(Problem(name, "unreadable"))
    return problems

"""SHA256SUMS: the one manifest format of a run folder, its one parser and its one checker.

The format is `sha256sum` output, so a reviewer needs only coreutils; the writer refuses a
name coreutils would escape, so `render`, `parse` and `sha256sum -c --strict` read every
line alike. Evidence trees are hostile: walks never follow a symlink nor open anything but
a regular file, `write_manifest` refuses a tree a seal cannot vouch for, and
`verify_folder` adds "exactly these files, nothing else" to `sha256sum -c --strict`."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.base.atomic import write_text
from harness.base.hashing import sha256_tree, sha256_tree_each
from harness.base.readfile import InputError, read_bounded
from harness.base.tree import (
    Entry,
    NotRegular,
    TooMany,
    chmod_beneath,
    path_problem,
    printable,
    too_long,
    walk,
)
from harness.measure.runfolder.layout import ADDENDA, HARNESS_MADE_DIRS, OBSERVATIONS, SUMS

MANIFEST_LIMIT = 256 * 1024 * 1024  # ~2.5 million lines: far beyond any run
# The workload's own folder costs it nothing to fill with a huge (sparse) file, and hashing
# one would hold up sealing for hours, so beyond this size it is removed, not sealed.
WORKLOAD_DIR = OBSERVATIONS
MAX_WORKLOAD_FILE = 8 * 1024**3
MAX_ENTRIES = 100_000  # far beyond any run; sealing and verifying stay within seconds
FILE_MODE = 0o444  # fixed modes, never remembered ones: no write, exec, setuid or sticky bit
DIR_MODE = 0o555
# Strict on purpose: lowercase hex and two spaces, exactly as sha256sum writes them, so no
# edit of a manifest (not even a case change) reads as the same manifest.
_LINE = re.compile(rb"([0-9a-f]{64})  (.+)", re.S)

Entries = list[tuple[str, str]]  # (name, hex) in file order, duplicates kept
BadLines = list[tuple[int, str]]  # (line number, why)


class Unsealable(OSError):
    """The tree holds something no seal may vouch for; nothing was written."""


def render(digests: Mapping[str, str]) -> str:
    """`sha256sum` lines sorted by name; ValueError for a name that would need escaping."""
    lines = []
    for name in sorted(digests):
        problem = path_problem(name)
        if problem:
            raise ValueError(f"{printable(name)}: {problem}; it cannot be sealed")
        lines.append(f"{digests[name]}  {name}\n")
    return "".join(lines)


def parse(data: bytes) -> tuple[Entries, BadLines]:
    """The one parser, pure and strict: ([(name, hex)] in file order, duplicates kept;
    [(line number, why)]). Lines end at b"\\n" only, the last one too; no `*`, `./` or
    backslash escaping, no empty line."""
    entries: Entries = []
    bad: BadLines = []
    lines = data.split(b"\n")
    unterminated = lines.pop()  # b"" when the data ends with a newline, as it must
    if unterminated:
        lines.append(unterminated)
    for number, raw in enumerate(lines, 1):
        m = _LINE.fullmatch(raw)
        if m is None:
            bad.append((number, "not a `<64 lowercase hex>  <name>` line"))
            continue
        try:
            name = m.group(2).decode("utf-8")
        except UnicodeDecodeError:
            bad.append((number, "the name is not UTF-8"))
            continue
        problem = path_problem(name)
        if problem:
            bad.append((number, f"{printable(name)}: {problem}"))
            continue
        entries.append((name, m.group(1).decode("ascii")))
    if unterminated:
        bad.append((len(lines), "the last line has no newline"))
    return entries, bad


def load(path: Path) -> tuple[Entries, BadLines]:
    """Read a manifest bounded (regular file only) and parse it; InputError when unreadable."""
    return parse(read_bounded(path, MANIFEST_LIMIT, "manifest"))


def compare(claims: Mapping[str, str],
            found: Mapping[str, str | OSError | None]) -> list[tuple[str, str]]:
    """The one checker: (name, kind) per difference, sorted; kind is missing, extra,
    unreadable (an OSError) or changed. None found means "present, not hashed"."""
    out = []
    for name in sorted(set(claims) | set(found)):
        if name not in found:
            out.append((name, "missing"))
        elif name not in claims:
            out.append((name, "extra"))
        elif isinstance(found[name], OSError):
            out.append((name, "unreadable"))
        elif found[name] != claims[name]:
            out.append((name, "changed"))
    return out


def empty_folders(entries: list[Entry]) -> list[str]:
    """Pure: the folders among `entries` with no regular file anywhere below them."""
    holding: set[str] = set()
    for e in entries:
        if e.is_file:
            parts = e.rel.split("/")[:-1]
            holding.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return [e.rel for e in entries if e.is_dir and e.rel not in holding]


def too_big(e: Entry) -> bool:
    """Pure: a workload-written file too large to hash (see MAX_WORKLOAD_FILE)."""
    return (e.is_file and e.rel.startswith(WORKLOAD_DIR + "/")
            and e.size > MAX_WORKLOAD_FILE)


def unsealable(entries: list[Entry]) -> list[str]:
    """Pure: why each entry of a tree could not be sealed, as one line each."""
    out = []
    for e in entries:
        if e.name_problem:
            out.append(f"{printable(e.rel)}: {e.name_problem}")
        elif not (e.is_file or e.is_dir):
            out.append(f"{printable(e.rel)}: a {e.kind}, not a regular file")
        elif e.too_deep or too_long(e.rel):
            out.append(f"{printable(e.rel)[:200]}: nested too deep or too long a path")
        elif too_big(e):
            out.append(f"{printable(e.rel)}: {e.size} bytes written by the workload, over "
                       f"the {MAX_WORKLOAD_FILE} byte limit")
    out += [f"{printable(rel)}: an empty folder (a seal cannot list it)"
            for rel in empty_folders(entries)]
    return out


def write_manifest(folder: Path) -> dict[str, str]:
    """Hash every file and write SHA256SUMS last; `Unsealable` (nothing written) otherwise."""
    try:
        entries = [e for e in walk(folder, MAX_ENTRIES) if e.rel != SUMS]
    except TooMany:
        raise Unsealable(errno.EFBIG, f"cannot seal: more than {MAX_ENTRIES} entries",
                         os.fspath(folder)) from None
    problems = unsealable(entries)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise Unsealable(errno.EINVAL, "cannot seal: " + "; ".join(problems[:5]) + more,
                         os.fspath(folder))
    sums = sha256_tree(folder, [e.rel for e in entries if e.is_file])
    text = render(sums)
    if len(text.encode("utf-8")) > MANIFEST_LIMIT:  # verify would refuse to read it
        raise Unsealable(errno.EFBIG, f"cannot seal: the manifest would be over "
                         f"{MANIFEST_LIMIT} bytes", os.fspath(folder))
    write_text(folder / SUMS, text, exclusive=True, mode=FILE_MODE)
    return sums


def make_read_only(folder: Path) -> None:
    """Files 0444, folders 0555, the folder last; never chmod a symlink or device. As root it
    also takes ownership: a workload root in its container can give files to any host uid,
    who could make them writable again."""
    owner = (os.getuid(), os.getgid())
    for e in reversed(walk(folder)):
        if e.is_file or e.is_dir:
            chmod_beneath(folder, e.rel, FILE_MODE if e.is_file else DIR_MODE, owner)
    chmod_beneath(folder, "", DIR_MODE, owner)


@dataclass(frozen=True)
class SealFault:
    """One reason a sealed folder is not intact. `path` is ASCII-safe (`tree.printable`)."""

    path: str
    kind: str
    detail: str | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}" + (f" ({self.detail})" if self.detail else "")


def _manifest_paths(entries: list[Entry]) -> list[str]:
    """The root SHA256SUMS and each `addenda/<name>/SHA256SUMS`, exactly one level down."""
    out = []
    for e in entries:
        parts = e.rel.split("/")
        if e.is_file and not e.name_problem and (
                e.rel == SUMS or (len(parts) == 3 and parts[0] == ADDENDA and parts[2] == SUMS)):
            out.append(e.rel)
    return out


def _tree_problems(entries: list[Entry]) -> list[SealFault]:
    """Entries no seal can vouch for, each named once (the topmost bad name only)."""
    out: list[SealFault] = []
    for e in entries:
        parent = e.rel.rpartition("/")[0]
        if e.name_problem:
            if not parent or path_problem(parent) is None:
                out.append(SealFault(printable(e.rel), "bad-name", e.name_problem))
        elif e.rel == ADDENDA and not e.is_dir:
            out.append(SealFault(ADDENDA, "not-a-folder", f"a {e.kind}; addenda must be a "
                               "real folder"))
        elif not (e.is_file or e.is_dir):
            to = f" -> {printable(e.target)}" if e.target is not None else ""
            out.append(SealFault(printable(e.rel), "not-regular", f"a {e.kind}{to}"))
        elif e.too_deep or too_long(e.rel):
            out.append(SealFault(printable(e.rel), "too-deep", "nested below the walker's depth "
                               "limit, or a path too long to seal"))
    return out


def _claims(folder: Path, manifests: list[str],
            problems: list[SealFault]) -> dict[str, str]:
    """Full relative path -> expected hex, over every manifest; conflicts are problems."""
    claims: dict[str, str] = {}
    owner: dict[str, str] = {}
    for m in manifests:
        base = m[: -len(SUMS)]
        try:
            lines, bad = load(folder / m)
        except InputError as e:
            problems.append(SealFault(m, "unreadable", e.message))
            continue
        problems += [SealFault(m, "bad-line", f"line {n}: {why}") for n, why in bad]
        seen: set[str] = set()
        for name, digest in lines:
            full = base + name
            if name in seen:
                problems.append(SealFault(full, "duplicate", f"listed more than once in {m}"))
                continue
            seen.add(name)
            if full in manifests:
                problems.append(SealFault(full, "claims-a-manifest", f"listed in {m}"))
            elif full in claims:
                problems.append(SealFault(full, "claimed-twice", f"by {owner[full]} and {m}"))
            else:
                claims[full], owner[full] = digest, m
    return claims


def _walk_sealed(folder: Path) -> list[Entry] | SealFault:
    """The sealed tree's entries, or the one problem that stops it being walked at all."""
    try:
        return walk(folder, 2 * MAX_ENTRIES)  # a run and its addenda, with room
    except TooMany:
        return SealFault(".", "too-many", f"more than {2 * MAX_ENTRIES} entries: no seal "
                       "holds that many")
    except NotRegular:
        return SealFault(".", "not-a-folder", "the run folder must be a real folder, not a "
                       "symlink")
    except OSError as e:
        return SealFault(".", "unreadable", e.strerror or str(e))


def verify_folder(folder: Path, digests: Mapping[str, str] | None = None,
                  entries: list[Entry] | None = None) -> list[SealFault]:
    """Re-hash a sealed folder: its SHA256SUMS plus every addendum's own. Every regular file
    must be claimed by exactly one manifest and match it; nothing else may be there.
    `digests`: hashes the caller already took of these files, so each is read once; `entries`:
    the folder as the caller listed it (`tree.listed`), for a tree whose files are not on disk."""
    entries = _walk_sealed(folder) if entries is None else entries
    if isinstance(entries, SealFault):
        return [entries]
    by_rel = {e.rel: e for e in entries}
    if SUMS not in by_rel:
        return [SealFault(SUMS, "no-manifest")]
    problems = _tree_problems(entries)
    manifests = _manifest_paths(entries)
    claims = _claims(folder, manifests, problems)
    present = {e.rel for e in entries if e.is_file and not e.name_problem} - set(manifests)
    known = digests or {}
    hashed: Mapping[str, str | OSError] = sha256_tree_each(
        folder, sorted(n for n in claims if n in present and n not in known))
    found = {name: known.get(name) or hashed.get(name) for name in present}
    for name, kind in compare(claims, found):
        if kind == "missing" and name in by_rel:
            continue  # a non-regular entry there is named above already
        if kind == "extra" and name.rpartition("/")[2] == SUMS:
            kind = "stray-manifest"
        err = found.get(name)
        detail = (getattr(err, "strerror", None) or str(err)) if kind == "unreadable" else None
        problems.append(SealFault(name, kind, detail))
    sealed_dirs = {"/".join(p.split("/")[:i]) for p in [*claims, *manifests]
                   for i in range(1, p.count("/") + 1)}
    problems += [SealFault(e.rel, "extra-folder", "holds no sealed file") for e in entries
                 if e.is_dir and not e.name_problem and not e.too_deep
                 and e.rel not in sealed_dirs and e.rel not in HARNESS_MADE_DIRS]
    return problems

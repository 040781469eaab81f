"""Seals: the source seal over what defines a run, and the SHA256SUMS manifest of a run folder.

The manifest is `sha256sum -c` format so a reviewer needs only coreutils. Later judgements
are added as addenda, each folder with its own SHA256SUMS, so nothing sealed is rewritten.

Evidence trees are hostile (the workload writes into them), so the manifest side is built
on `harness.tree`, the one walker: nothing is followed through a symlink, nothing but a
regular file is ever opened. Two rules hold by construction:
- `write_manifest` refuses (`Unsealable`) to seal a tree that holds anything a seal cannot
  vouch for: a symlink, FIFO, socket or device, a name that `tree.path_problem` rejects
  (not UTF-8; a control, format or line-separator character such as \r, U+0085, U+2028 or a
  bidi override; a backslash), a folder deeper than `tree.MAX_DEPTH`, or an empty folder.
  The cleaner (`harness.pipeline.clean`) removes and records such entries first, so every
  seal is plain `<hex>  <name>` lines that coreutils and `verify_folder` read alike; no
  name ever needs coreutils' backslash escaping.
- `verify_folder` is at least as strict as `sha256sum -c --strict` plus "exactly these
  files, nothing else": SHA256SUMS is split on b"\n" only, one strict line format, a name
  listed twice fails even when one line is right, and every symlink, odd entry, bad name,
  unclaimed file or folder and misplaced manifest is a named problem.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.atomic import write_text
from harness.hashing import sha256_many, sha256_tree, sha256_tree_each
from harness.readfile import InputError, read_bounded
from harness.tree import (
    Entry,
    NotRegular,
    TooMany,
    chmod_beneath,
    path_problem,
    printable,
    too_long,
    walk,
)

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
    digests = sha256_many(labelled.values(), follow_symlinks=True)  # operator's own files
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

MANIFEST_LIMIT = 256 * 1024 * 1024  # ~2.5 million lines: far beyond any run
# The folder the workload writes directly (its output mount). A file there costs the
# workload nothing to make huge (a sparse 15 TiB file is one `truncate`), and hashing it
# would hold up sealing (and every later run's recovery) for hours, so beyond this size
# it is not sealed but removed and listed with its size. The harness's own files (logs
# it pumped) are real bytes it wrote and are never judged by size.
WORKLOAD_DIR = "observations"
MAX_WORKLOAD_FILE = 8 * 1024**3
# Entries a run folder may hold: far beyond any real run (a few dozen harness files plus
# the workload's), small enough that sealing and verifying stay within seconds.
MAX_ENTRIES = 100_000
FILE_MODE = 0o444  # fixed modes, never remembered ones: no write, exec, setuid or sticky bit
DIR_MODE = 0o555
_LINE = re.compile(rb"([0-9a-f]{64})  (.+)", re.S)


class Unsealable(OSError):
    """The tree holds something no seal may vouch for; nothing was written."""


def render_sums(digests: dict[str, str]) -> str:
    """`sha256sum` lines, one per file; a name that needs escaping is refused (ValueError)."""
    lines = []
    for name in sorted(digests):
        problem = path_problem(name)
        if problem:
            raise ValueError(f"{printable(name)}: {problem}; it cannot be sealed")
        lines.append(f"{digests[name]}  {name}\n")
    return "".join(lines)


def parse_sums(data: bytes) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    """Pure, strict: ([(name, hex)] in file order, duplicates kept; [(line number, why)]).

    Lines end at b"\\n" only (never \\r, U+0085 or U+2028); each is exactly 64 lowercase
    hex, two spaces and a sealable relative name: no `*` binary marker, no `./`, no
    backslash escaping, no empty line."""
    entries: list[tuple[str, str]] = []
    bad: list[tuple[int, str]] = []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
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
    return entries, bad


def files_under(folder: Path) -> list[str]:
    """Every regular file below `folder`, as sorted relative POSIX paths.

    Follows symlinks (a model folder may be a symlink farm); never use it for evidence."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for f in files:
            out.append((Path(root) / f).relative_to(folder).as_posix())
    return sorted(out)


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
    """Hash every file below `folder` and write SHA256SUMS last. Returns the digests.

    Refuses (`Unsealable`, writing nothing) a tree that still holds anything a seal cannot
    vouch for, so no code path can seal a folder that would not verify."""
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
    text = render_sums(sums)
    if len(text.encode("utf-8")) > MANIFEST_LIMIT:  # verify would refuse to read it
        raise Unsealable(errno.EFBIG, f"cannot seal: the manifest would be over "
                         f"{MANIFEST_LIMIT} bytes", os.fspath(folder))
    write_text(folder / SUMS, text, exclusive=True, mode=FILE_MODE)
    return sums


def make_read_only(folder: Path) -> None:
    """Files 0444, folders 0555, the folder itself last; a symlink or device is never
    chmodded (that would change whatever it points to), and there should be none.

    A harness running as root also takes ownership of everything it seals: a workload
    that is root in its container can give its files to any host uid, and that user could
    then make them writable again and change sealed evidence."""
    owner = (os.getuid(), os.getgid())
    for e in reversed(walk(folder)):
        if e.is_file or e.is_dir:
            chmod_beneath(folder, e.rel, FILE_MODE if e.is_file else DIR_MODE, owner)
    chmod_beneath(folder, "", DIR_MODE, owner)


# ---- verification ------------------------------------------------------------------------

# Folders the harness itself creates before the container starts. Seals made before empty
# folders were pruned (harness <= 0.1.0) keep them empty; they carry nothing, so they are
# not "extra" (anything inside them is still judged file by file).
HARNESS_MADE_DIRS = frozenset({"observations", "logs"})


@dataclass(frozen=True)
class Problem:
    """One reason a sealed folder is not intact. `path` is ASCII-safe (`tree.printable`).

    kind: no-manifest | unreadable | bad-line | duplicate | claimed-twice | claims-a-manifest
    | changed | missing | extra | extra-folder | stray-manifest | not-regular | bad-name
    | too-deep | not-a-folder | too-many"""

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


def _tree_problems(entries: list[Entry]) -> list[Problem]:
    """Entries no seal can vouch for, each named once (the topmost bad name only)."""
    out: list[Problem] = []
    for e in entries:
        parent = e.rel.rpartition("/")[0]
        if e.name_problem:
            if not parent or path_problem(parent) is None:
                out.append(Problem(printable(e.rel), "bad-name", e.name_problem))
        elif e.rel == ADDENDA and not e.is_dir:
            out.append(Problem(ADDENDA, "not-a-folder", f"a {e.kind}; addenda must be a "
                               "real folder"))
        elif not (e.is_file or e.is_dir):
            to = f" -> {printable(e.target)}" if e.target is not None else ""
            out.append(Problem(printable(e.rel), "not-regular", f"a {e.kind}{to}"))
        elif e.too_deep or too_long(e.rel):
            out.append(Problem(printable(e.rel), "too-deep", "nested below the walker's depth "
                               "limit, or a path too long to seal"))
    return out


def _claims(folder: Path, manifests: list[str],
            problems: list[Problem]) -> dict[str, str]:
    """Full relative path -> expected hex, over every manifest; conflicts are problems."""
    claims: dict[str, str] = {}
    owner: dict[str, str] = {}
    for m in manifests:
        base = m[: -len(SUMS)]
        try:
            data = read_bounded(folder / m, MANIFEST_LIMIT, "manifest")
        except InputError as e:
            problems.append(Problem(m, "unreadable", e.message))
            continue
        lines, bad = parse_sums(data)
        problems += [Problem(m, "bad-line", f"line {n}: {why}") for n, why in bad]
        seen: set[str] = set()
        for name, digest in lines:
            full = base + name
            if name in seen:
                problems.append(Problem(full, "duplicate", f"listed more than once in {m}"))
                continue
            seen.add(name)
            if full in manifests:
                problems.append(Problem(full, "claims-a-manifest", f"listed in {m}"))
            elif full in claims:
                problems.append(Problem(full, "claimed-twice", f"by {owner[full]} and {m}"))
            else:
                claims[full], owner[full] = digest, m
    return claims


def verify_folder(folder: Path) -> list[Problem]:
    """Re-hash a sealed folder: its SHA256SUMS plus every addendum's own SHA256SUMS.

    Every regular file must be claimed by exactly one manifest and match it; nothing else
    may be there: no other entry kind, no unclaimed file or folder, no unsealable name."""
    try:
        entries = walk(folder, 2 * MAX_ENTRIES)  # a run and its addenda, with room
    except TooMany:
        return [Problem(".", "too-many", f"more than {2 * MAX_ENTRIES} entries: no seal "
                        "holds that many")]
    except NotRegular:
        return [Problem(".", "not-a-folder", "the run folder must be a real folder, not a "
                        "symlink")]
    except OSError as e:
        return [Problem(".", "unreadable", e.strerror or str(e))]
    by_rel = {e.rel: e for e in entries}
    if SUMS not in by_rel:
        return [Problem(SUMS, "no-manifest")]
    problems = _tree_problems(entries)
    manifests = _manifest_paths(entries)
    claims = _claims(folder, manifests, problems)
    present = {e.rel for e in entries if e.is_file and not e.name_problem} - set(manifests)
    expected = sorted(n for n in claims if n in present)
    digests = sha256_tree_each(folder, expected)
    for name in sorted(set(claims) | present):
        if name not in present:
            if name not in by_rel:  # a non-regular entry there is named above already
                problems.append(Problem(name, "missing"))
        elif name not in claims:
            stray = name.rpartition("/")[2] == SUMS
            problems.append(Problem(name, "stray-manifest" if stray else "extra"))
        elif isinstance(digests[name], OSError):
            err = digests[name]
            problems.append(Problem(name, "unreadable", getattr(err, "strerror", None)
                                    or str(err)))
        elif digests[name] != claims[name]:
            problems.append(Problem(name, "changed"))
    sealed_dirs = {"/".join(p.split("/")[:i]) for p in [*claims, *manifests]
                   for i in range(1, p.count("/") + 1)}
    problems += [Problem(e.rel, "extra-folder", "holds no sealed file") for e in entries
                 if e.is_dir and not e.name_problem and not e.too_deep
                 and e.rel not in sealed_dirs and e.rel not in HARNESS_MADE_DIRS]
    return problems

"""The project's provenance: which git commit ran, and whether its tree was clean.

The repository is hostile input: its config can name commands git would run (fsmonitor,
hooks, filter drivers), so git runs with those off, without optional locks or the caller's
GIT_* variables, with a timeout and bounded output; a repository whose own config sets a
filter driver is not asked for its status."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.base.atomic import dumps_json
from harness.base.tree import printable
from harness.measure.host.tools import run_bounded
from harness.measure.origin import CHECKOUT, INSTALLED, Origin, parse_record, record_problems, which
from harness.measure.seal import HARNESS_LABEL

MAX_CHANGED = 200  # paths kept in "changed"; "changed_total" counts them all
MAX_OUTPUT = 4 * 1024 * 1024  # bytes read from one git command's stdout
TIMEOUT_S = 5.0
_HEX = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1 or SHA-256 object names
_CODES = set(b" MTADRCU?!")
_SAFE_SCOPES = {"system", "global"}  # the operator's own config, not the repository's


class GitOutputError(ValueError):
    """Bytes that are not what the git command prints."""


def parse_head(data: bytes) -> str:
    """The commit id `git rev-parse` printed (one object name and a newline)."""
    text = data.strip(b"\n")
    if not _HEX.fullmatch(text):
        raise GitOutputError(f"not a commit id: {text[:80]!r}")
    return text.decode("ascii")


def parse_status(data: bytes, limit: int = MAX_CHANGED) -> tuple[list[str], int]:
    """The changed paths in `git status --porcelain=v1 -z` output: (at most `limit`, sorted;
    how many in all). Non-UTF-8 bytes read as `\\xNN` so run.json can hold them."""
    paths: set[str] = set()
    fields = data.split(b"\0")
    if fields[-1] != b"":
        raise GitOutputError("the status output does not end with a NUL")
    fields.pop()
    i = 0
    while i < len(fields):
        entry = fields[i]
        if len(entry) < 4 or entry[2:3] != b" " or not set(entry[:2]) <= _CODES:
            raise GitOutputError(f"not a status entry: {entry[:80]!r}")
        paths.add(entry[3:].decode("utf-8", "backslashreplace"))  # JSON-writable text
        i += 1
        if b"R" in entry[:2] or b"C" in entry[:2]:
            if i >= len(fields) or not fields[i]:
                raise GitOutputError(f"a rename without its source path: {entry[:80]!r}")
            i += 1
    return sorted(paths)[:limit], len(paths)


def unsafe_filters(data: bytes) -> list[str]:
    """Filter-driver keys set outside the system and global config (`--show-scope`)."""
    fields = data.split(b"\0")
    keys = []
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key = entry.split(b"\n", 1)[0].decode("utf-8", "replace")
        if scope.decode("utf-8", "replace") not in _SAFE_SCOPES:
            keys.append(key)
    return sorted(set(keys))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def git_command(folder: Path, *args: str) -> tuple[int | None, bytes, str]:
    """git as the harness always runs it: (exit status or None, stdout, first error line or why)."""
    git = shutil.which("git")
    if git is None:
        return None, b"", "git not found on PATH"
    # core.excludesFile=/dev/null: only the repository's committed .gitignore files may hide
    # a path from `git status`, never the user's global excludes (info/exclude: clean_at)
    argv = [git, "--no-pager", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
            "-c", "core.excludesFile=/dev/null",
            "--no-optional-locks", "-C", os.fspath(folder), *args]
    try:
        ran = run_bounded(argv, timeout=TIMEOUT_S, limit=MAX_OUTPUT, env=_env())
    except OSError as e:
        return None, b"", f"cannot run git: {e.strerror or e}"
    why = (f"git took over {TIMEOUT_S:g}s" if ran.timed_out else
           f"git printed over {MAX_OUTPUT} bytes" if ran.rc is None else None)
    return ran.rc, ran.out, why or ran.first_error() or f"git exited {ran.rc}"


def git_state(project_dir: Path) -> dict:
    """{"commit", "dirty", "changed", "changed_total", "error"} of `project_dir`'s repository."""
    state: dict = {"commit": None, "dirty": None, "changed": [], "changed_total": 0,
                   "error": None}
    rc, out, msg = git_command(project_dir, "rev-parse", "--is-inside-work-tree")
    if rc != 0 or out.strip() != b"true":
        state["error"] = f"not a git work tree: {msg}" if rc != 0 else "not a git work tree"
        return state
    rc, out, msg = git_command(project_dir, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    try:
        state["commit"] = parse_head(out) if rc == 0 else None
    except GitOutputError as e:
        state["error"] = f"git rev-parse: {e}"
    if rc != 0:
        state["error"] = "the repository has no commit yet" if rc == 1 else msg
    rc, out, msg = git_command(project_dir, "config", "-z", "--show-scope", "--get-regexp",
                               r"^filter\.")
    keys = unsafe_filters(out) if rc == 0 else []
    if rc not in (0, 1) or keys:
        state["error"] = (f"the repository's own config sets filter drivers, which git status "
                          f"would run: {', '.join(keys[:5])}" if keys else f"git config: {msg}")
        return state
    rc, out, msg = git_command(project_dir, "status", "--porcelain=v1", "-z",
                               "--untracked-files=normal", "--ignore-submodules=dirty")
    if rc != 0:
        state["error"] = f"git status: {msg}"
        return state
    try:
        changed, total = parse_status(out)
    except GitOutputError as e:
        state["error"] = f"git status: {e}"
        return state
    state.update(dirty=total > 0, changed=changed, changed_total=total)
    return state


def approval_aside(state: dict, project_dir: Path, approval: dict | None) -> dict:
    """The git state with the run's own approval left out of `changed` (named in
    `own_approval`): the file its approval record names (and its .sig), untracked (new
    approvals are committed after the review), still holding the recorded digest, in the
    very form `harness approve` writes. Any other path, a hand-edited or committed-then-
    changed approval, stays a change."""
    top = _top(project_dir) if approval and state.get("dirty") else None
    named = approval.get("file") if approval else None
    if top is None or not isinstance(named, str):
        return state
    path = Path(project_dir, named)
    rel = os.path.relpath(os.path.realpath(path), top)
    listed = [p for p in state["changed"] if p == rel or (p.endswith("/") and rel.startswith(p))]
    data = _read_nofollow(path)
    if len(listed) != 1 or isinstance(data, OSError) or not _as_approve_wrote(data) or \
            "sha256:" + hashlib.sha256(data).hexdigest() != approval.get("digest"):
        return state
    rc, out, _ = git_command(project_dir, "status", "--porcelain=v1", "-z",
                             "--untracked-files=all", "--", f":(top){listed[0]}")
    own = {f"?? {p}".encode("utf-8", "surrogateescape") for p in (rel, rel + ".sig")}
    found = set(out.split(b"\0")[:-1]) if rc == 0 else set()
    if f"?? {rel}".encode("utf-8", "surrogateescape") not in found or not found <= own:
        return state
    total = state["changed_total"] - 1
    return {**state, "changed": [p for p in state["changed"] if p != listed[0]],
            "changed_total": total, "dirty": total > 0, "own_approval": rel}


def _as_approve_wrote(data: bytes) -> bool:
    try:
        return dumps_json(json.loads(data)).encode() == data
    except (ValueError, RecursionError):
        return False


MAX_PROBLEMS = 20  # problems named in a CleanCheck; `problems_total` counts them all
APPROVALS_PREFIX = "approvals/"  # new approvals are committed after the review: never dirty


@dataclass(frozen=True)
class Tracked:
    """One file of the HEAD tree, as `git ls-tree` lists it."""

    mode: str  # "100644", "100755", "120000" (a symlink), "160000" (a submodule)
    oid: str


@dataclass(frozen=True)
class Found:
    """One sealed file as the host has it (rel None: outside the checkout; data None: unread)."""

    label: str
    rel: str | None
    is_link: bool = False
    data: bytes | None = None
    why: str | None = None


@dataclass(frozen=True)
class CleanCheck:
    """Whether every sealed file is in HEAD and the checkout is otherwise unchanged."""

    commit: str | None
    clean: bool
    problems: tuple[str, ...]
    problems_total: int
    harness: dict | None = None  # the harness that checked (`harness_state`)

    def as_dict(self) -> dict:
        return {"commit": self.commit, "clean": self.clean, "problems": list(self.problems),
                "problems_total": self.problems_total}

    def why(self, shown: int = 10) -> str:
        """One line for a refusal: the commit and the first `shown` problems, escaped."""
        listed = "; ".join(printable(p) for p in self.problems[:shown])
        more = (f" (and {self.problems_total - shown} more)"
                if self.problems_total > shown else "")
        return (f"the checkout is not clean at commit {printable(str(self.commit))}: "
                f"{listed}{more}")


def blob_id(data: bytes, object_format: str = "sha1") -> str:
    """Pure: git's object name of a blob holding `data` (what `git hash-object` prints)."""
    algo = hashlib.sha256 if object_format == "sha256" else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def parse_tree(data: bytes) -> dict[str, Tracked]:
    """Pure: `git ls-tree -r -z --full-tree HEAD` as path -> Tracked."""
    out: dict[str, Tracked] = {}
    entries = data.split(b"\0")
    if entries[-1] != b"":
        raise GitOutputError("the tree listing does not end with a NUL")
    for entry in entries[:-1]:
        head, tab, path = entry.partition(b"\t")
        parts = head.split(b" ")
        if not tab or len(parts) != 3 or not _HEX.fullmatch(parts[2]) or not path:
            raise GitOutputError(f"not a tree entry: {entry[:80]!r}")
        out[path.decode("utf-8", "backslashreplace")] = Tracked(parts[0].decode("ascii",
                                                                  "replace"), parts[2].decode())
    return out


def file_problems(tree: dict[str, Tracked], found: list[Found],
                  object_format: str = "sha1") -> list[str]:
    """Pure: why each sealed file is not the same bytes in the HEAD tree ([] when all are)."""
    out = []
    for f in found:
        if f.rel is None:
            out.append(f"{f.label}: outside the checkout, so in no commit")
        elif f.is_link:
            out.append(f"{f.rel}: a symlink (the seal holds its target's bytes, git its link)")
        elif f.data is None:
            out.append(f"{f.rel}: unreadable ({f.why})")
        elif f.rel not in tree:
            out.append(f"{f.rel}: not tracked in HEAD (untracked or git-ignored)")
        elif tree[f.rel].mode not in ("100644", "100755"):
            out.append(f"{f.rel}: not a plain file in HEAD (mode {tree[f.rel].mode})")
        elif tree[f.rel].oid != blob_id(f.data, object_format):
            out.append(f"{f.rel}: differs from HEAD")
    return out


def status_problems(changed: list[str], total: int, sealed: frozenset[str] = frozenset()
                    ) -> list[str]:
    """Pure: the paths `git status` listed as changed, approvals/ and the sealed files aside;
    paths beyond MAX_CHANGED count as changes too."""
    shown = [p for p in changed if not p.startswith(APPROVALS_PREFIX) and p not in sealed]
    out = [f"{p}: changed or untracked in the checkout" for p in shown]
    if total > len(changed):
        out.append(f"{total - len(changed)} more changed path(s) not listed")
    return out


def hidden_entries(data: bytes) -> list[str]:
    """Pure: the assume-unchanged or skip-worktree paths in `git ls-files -v -z`: `git status`
    never looks at their bytes, so a stubbed file there reads as clean."""
    out = []
    for entry in data.split(b"\0"):
        tag, _, path = entry.partition(b" ")
        if len(tag) == 1 and (tag.islower() or tag == b"S") and path:
            out.append(path.decode("utf-8", "backslashreplace"))
    return sorted(out)


def exclude_lines(data: bytes) -> list[str]:
    """Pure: an info/exclude file's patterns: what they hide was never committed for review."""
    lines = (line.strip() for line in data.decode("utf-8", "replace").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _hidden(project_dir: Path) -> list[str]:
    """Paths `git status` would not show although no committed .gitignore says so."""
    rc, out, msg = git_command(project_dir, "ls-files", "-v", "-z")
    problems = ([f"{p}: marked assume-unchanged or skip-worktree, so git status does not "
                 "look at it" for p in hidden_entries(out)] if rc == 0
                else [f"git ls-files: {msg}"])
    rc, out, _ = git_command(project_dir, "rev-parse", "--git-path", "info/exclude")
    path = Path(project_dir, out.decode("utf-8", "surrogateescape").strip("\n"))
    try:
        patterns = exclude_lines(path.read_bytes()[:MAX_OUTPUT]) if rc == 0 else []
    except OSError:
        patterns = []
    return problems + [f"info/exclude hides {p!r} from git status (only a committed "
                       ".gitignore may)" for p in patterns[:5]]


def _found(top: Path, label: str, path: Path) -> Found:
    real = Path(os.path.realpath(path.parent)) / path.name  # the name itself never resolved
    if not real.is_relative_to(top):
        return Found(label, None)
    rel = real.relative_to(top).as_posix()
    if os.path.islink(real):
        return Found(label, rel, is_link=True)
    data = _read_nofollow(real)
    if isinstance(data, OSError):
        return Found(label, rel, why=data.strerror or str(data))
    return Found(label, rel, data=data)


def _read_nofollow(path: Path) -> bytes | OSError:
    """A file's bytes without following a symlink or blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return e
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _tree(project_dir: Path) -> tuple[Path, dict[str, Tracked], str] | str:
    """(the work tree's top, HEAD's files, object format), or why git cannot tell."""
    rc, out, msg = git_command(project_dir, "rev-parse", "--show-toplevel")
    if rc != 0:
        return f"git rev-parse --show-toplevel: {msg}"
    top = Path(os.path.realpath(out.decode("utf-8", "surrogateescape").strip("\n")))
    rc, fmt, _ = git_command(project_dir, "rev-parse", "--show-object-format")
    rc_tree, listing, msg = git_command(project_dir, "ls-tree", "-r", "-z", "--full-tree", "HEAD")
    if rc_tree != 0:
        return f"git ls-tree: {msg}"
    try:
        return top, parse_tree(listing), fmt.decode().strip() if rc == 0 else "sha1"
    except GitOutputError as e:
        return f"git ls-tree: {e}"


def _clean_in_checkout(project_dir: Path, files: dict[str, Path],
                       state: dict | None = None) -> CleanCheck:
    """Is every file in `files` tracked in HEAD with the same bytes, and the rest of the
    checkout unchanged? `git status` alone never lists a git-ignored or outside file."""
    state = state if state is not None else git_state(project_dir)
    if state["error"] or not isinstance(state["commit"], str):
        why = state["error"] or "no commit"
        return CleanCheck(state["commit"], False, (f"git cannot tell: {why}",), 1)
    listed = _tree(project_dir)
    if isinstance(listed, str):
        return CleanCheck(state["commit"], False, (f"git cannot tell: {listed}",), 1)
    top, tree, fmt = listed
    found = [_found(top, label, Path(os.path.abspath(p))) for label, p in sorted(files.items())]
    sealed = frozenset(f.rel for f in found if f.rel is not None)
    problems = status_problems(state["changed"], state["changed_total"], sealed)
    problems += _hidden(project_dir) + file_problems(tree, found, fmt)
    return CleanCheck(state["commit"], not problems, tuple(problems[:MAX_PROBLEMS]),
                      len(problems))


def _top(project_dir: Path) -> Path | None:
    """The work tree's top folder holding `project_dir` (None: not in one)."""
    rc, out, _ = git_command(project_dir, "rev-parse", "--show-toplevel")
    if rc != 0:
        return None
    return Path(os.path.realpath(out.decode("utf-8", "surrogateescape").strip("\n")))


def _installed_problems(found: Origin, files: dict[str, Path]) -> list[str]:
    """Why the installed harness's sealed files are not its distribution's RECORD."""
    try:
        listed = parse_record((found.record or b"").decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError too
        return [f"harness {found.version} at {found.location}: its RECORD is not pip's ({e})"]
    where = (f"harness {found.version} installed at {found.location}: reinstall it from its "
             "wheel")
    own = {label: _read_nofollow(path) for label, path in files.items()}  # a link is not pip's
    own = {label: None if isinstance(d, OSError) else d for label, d in own.items()}
    return [f"{problem} ({where})" for problem in record_problems(listed, own)]


def harness_state(found: Origin | None = None,
                  known: tuple[Path, dict] | None = None) -> dict:
    """The harness that made a record: `origin.Origin.as_dict`, plus commit and dirty for a
    checkout. `known`: (folder, its `git_state`) the caller has already read, reused."""
    found = found or which()
    doc: dict = {**found.as_dict(), "commit": None, "dirty": None}
    if found.mode == CHECKOUT:
        same = known is not None and os.path.realpath(known[0]) == os.path.realpath(
            found.location)
        state = known[1] if same and known is not None else git_state(found.location)
        doc.update(commit=state["commit"], dirty=state["dirty"])
    return doc


def clean_at(project_dir: Path, files: dict[str, Path]) -> CleanCheck:
    """Is every sealed byte vouched for? The campaign's files by git (tracked in HEAD, the
    checkout otherwise unchanged); the harness's own files where they come from: an
    installed distribution by its RECORD, a source checkout by git at its own commit.
    `commit` stays the campaign checkout's HEAD, the one an approval names."""
    found = which()
    own = {label: p for label, p in files.items() if label.startswith(HARNESS_LABEL)}
    rest = {label: p for label, p in files.items() if label not in own}
    project = git_state(project_dir)
    state = harness_state(found, (project_dir, project))
    if found.mode == INSTALLED:
        check = _clean_in_checkout(project_dir, rest, project)
        extra = _installed_problems(found, own)
    else:
        home = _home(own) or found.location
        top = _top(home)
        if top is not None and top == _top(project_dir):
            return _with(_clean_in_checkout(project_dir, files, project), [], state)
        check = _clean_in_checkout(project_dir, rest, project)
        theirs = (_clean_in_checkout(home, own) if top is not None else
                  CleanCheck(None, False, (f"{home}: not a git work tree",), 1))
        extra = ([] if theirs.clean else
                 [f"the harness's checkout {top or home} at "
                  f"{theirs.commit}: {p}" for p in theirs.problems]
                 + [f"{theirs.problems_total - len(theirs.problems)} more problem(s) in "
                    "the harness's checkout"] * (theirs.problems_total > len(theirs.problems)))
    return _with(check, extra, state)


def _home(own: dict[str, Path]) -> Path | None:
    """The checkout holding the sealed harness package: its `__init__.py`, two levels up."""
    init = own.get(HARNESS_LABEL + "__init__.py")
    return Path(os.path.abspath(init)).parent.parent if init is not None else None


def _with(check: CleanCheck, extra: list[str], harness: dict) -> CleanCheck:
    problems = [*check.problems, *extra]
    return CleanCheck(check.commit, check.clean and not extra, tuple(problems[:MAX_PROBLEMS]),
                      check.problems_total + len(extra), harness)

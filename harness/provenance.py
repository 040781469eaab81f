"""The provenance of the project itself: which git commit ran, and whether its tree was clean.

`git_state(project_dir)` is what a run records; `parse_status` and `parse_head` are the pure
parsers over git's bytes, tested without git. A project repository is hostile like every
other input: its own config can name commands git would run (`core.fsmonitor`, hooks,
filter drivers), so git runs with the fsmonitor and hooks switched off, without optional
locks (status never writes the index, so no index hook), without the caller's GIT_*
variables, with a timeout and with its output bounded; a repository whose own config sets a
filter driver (which `git status` may run on a changed file) is not asked for its status.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import subprocess
import time
from pathlib import Path

MAX_CHANGED = 200  # paths kept in "changed"; "changed_total" counts them all
MAX_OUTPUT = 4 * 1024 * 1024  # bytes read from one git command's stdout
MAX_STDERR = 4096
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
    """The changed paths in `git status --porcelain=v1 -z` output: (at most `limit` of them,
    sorted; how many in all). A rename or copy counts once, by its new path. Bytes that are
    not UTF-8 read as `\\xNN` (a lone surrogate could not be written to run.json)."""
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
    """The filter-driver keys set outside the system and global config, from
    `git config -z --show-scope --get-regexp ^filter\\.` (entries `scope NUL key LF value NUL`)."""
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


def _drain(proc: subprocess.Popen, deadline: float) -> tuple[bytes, bytes, str | None]:
    """stdout and stderr of `proc`, bounded; the reason it was stopped, if it was."""
    out, err = bytearray(), bytearray()
    why = None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map() and why is None:
            left = deadline - time.monotonic()
            if left <= 0:
                why = f"git took over {TIMEOUT_S:g}s"
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if len(out) > MAX_OUTPUT:
                    why = f"git printed over {MAX_OUTPUT} bytes"
            del err[MAX_STDERR:]
    return bytes(out[:MAX_OUTPUT]), bytes(err), why


def _git(git: str, project_dir: Path, *args: str) -> tuple[int | None, bytes, str]:
    """(exit status or None when stopped, stdout, first line of stderr or why stopped)."""
    argv = [git, "--no-pager", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
            "--no-optional-locks", "-C", os.fspath(project_dir), *args]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=_env(), start_new_session=True)
    except OSError as e:
        return None, b"", f"cannot run git: {e.strerror or e}"
    with proc:
        out, err, why = _drain(proc, time.monotonic() + TIMEOUT_S)
        if why is not None:
            proc.kill()
        rc = proc.wait()
    first = err.decode("utf-8", "replace").strip().splitlines()[:1]
    return (None if why else rc), out, why or (first[0] if first else f"git exited {rc}")


def git_state(project_dir: Path) -> dict:
    """{"commit", "dirty", "changed", "changed_total", "error"} of the repository holding
    `project_dir`; commit/dirty None (and `error` says why) when git cannot tell."""
    state: dict = {"commit": None, "dirty": None, "changed": [], "changed_total": 0,
                   "error": None}
    git = shutil.which("git")
    if git is None:
        state["error"] = "git not found on PATH"
        return state
    rc, out, msg = _git(git, project_dir, "rev-parse", "--is-inside-work-tree")
    if rc != 0 or out.strip() != b"true":
        state["error"] = f"not a git work tree: {msg}" if rc != 0 else "not a git work tree"
        return state
    rc, out, msg = _git(git, project_dir, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    try:
        state["commit"] = parse_head(out) if rc == 0 else None
    except GitOutputError as e:
        state["error"] = f"git rev-parse: {e}"
    if rc != 0:
        state["error"] = "the repository has no commit yet" if rc == 1 else msg
    rc, out, msg = _git(git, project_dir, "config", "-z", "--show-scope", "--get-regexp",
                        r"^filter\.")
    keys = unsafe_filters(out) if rc == 0 else []
    if rc not in (0, 1) or keys:
        state["error"] = (f"the repository's own config sets filter drivers, which git status "
                          f"would run: {', '.join(keys[:5])}" if keys else f"git config: {msg}")
        return state
    return _status(git, project_dir, state)


def _status(git: str, project_dir: Path, state: dict) -> dict:
    rc, out, msg = _git(git, project_dir, "status", "--porcelain=v1", "-z",
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

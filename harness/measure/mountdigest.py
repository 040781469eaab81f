"""What a mount held at preflight, as one digest: the mounts the source seal does not cover.

A `sealed: false` mount (a venv) and a read-write one (the run's scratch) are bytes the
workload reads that the source seal leaves out, so two runs are a plain repeat only when
they held the same. Each gets one digest of every entry's path, type, mode, size and content,
walked without following a symlink (each entry opened relative to its parent with
O_NOFOLLOW; a FIFO or device listed, never opened). The walk streams into one running
digest, so memory does not grow with the mount. A stat cache (device, inode, size, mtime,
ctime) spares re-reading files; it is an aid, never evidence. A walk that fails or passes a
bound gives no digest and says why: "not known", never "same".
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.hashing import sha256_fd
from harness.base.tree import MAX_DEPTH, kind_of, printable
from harness.config.loader import resolve
from harness.config.mountable import digested
from harness.config.schema import Control, Mount
from harness.measure import modelcache

MAX_ENTRIES = 150_000  # per mount: the engine venv holds about 63,000 (its cache: ~65 MB)
MAX_BYTES = 64 << 30  # per mount: the engine venv holds 5.5 GB; more is not read at preflight
CACHE_NAME = "mount-hashes.json"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

Allowed = Callable[[Path], bool]  # may this real path be mounted (`Loaded.may_mount`)


class NotDigested(Exception):
    """Why a mount's content is not known (a bound passed, an entry unreadable)."""


@dataclass(frozen=True)
class MountDigest:
    """One mount's content at preflight. `digest` None: not known, `why` says why."""

    target: str
    source: str  # as the control names it, resolved against the control's folder
    real: str  # every symlink resolved: the path docker is given
    read_only: bool
    sealed: bool
    digest: str | None
    why: str | None = None
    kind: str | None = None  # of the mount's real path: dir, file, absent, ...
    counts: Mapping[str, int] = field(default_factory=dict)  # files, dirs, symlinks, others
    size: int = 0  # bytes of the regular files
    read: int = 0  # files read whole (the rest came from the cache)
    seconds: float = 0.0

    def record(self) -> dict:
        """The entry preflight.json keeps under `mounts`."""
        return {"target": self.target, "source": self.source, "real": self.real,
                "read_only": self.read_only, "sealed": self.sealed, "digest": self.digest,
                "why": self.why, "kind": self.kind, "counts": dict(self.counts),
                "bytes": self.size, "read": self.read, "seconds": round(self.seconds, 3)}


def cache_path(environ: Mapping[str, str]) -> Path | None:
    """The stat cache of mounted files' sha256, beside the model cache;
    HARNESS_MOUNT_CACHE=off reads every file every time, =PATH moves it."""
    setting = environ.get("HARNESS_MOUNT_CACHE", "")
    if setting.lower() in ("off", "0", "no"):
        return None
    return Path(setting) if setting else modelcache.default_cache_path().with_name(CACHE_NAME)


def entry_line(rel: str, kind: str, mode: int, size: int, content: str) -> bytes:
    """Pure: one entry as a JSON line (escaped: no name can pose as two entries). A folder's
    size depends on the file system, not its content, so it is left out."""
    return (json.dumps([rel, kind, stat.S_IMODE(mode), 0 if kind == "dir" else size,
                        content], ensure_ascii=True, separators=(",", ":")) + "\n").encode()


@dataclass
class _Hasher:

    root: str
    entries: dict[str, dict]  # the cache as loaded
    updates: dict[str, dict]  # what to store back
    racy_ns: int
    max_entries: int
    max_bytes: int
    digest: Any = field(default_factory=hashlib.sha256)
    counts: dict[str, int] = field(default_factory=lambda: {
        "files": 0, "dirs": 0, "symlinks": 0, "others": 0})
    size: int = 0
    read: int = 0
    seen: int = 0

    def add(self, rel: str, st: os.stat_result, content: str) -> None:
        kind = kind_of(st.st_mode)
        self.seen += 1
        if self.seen > self.max_entries:
            raise NotDigested(f"holds over {self.max_entries} entries: too many to digest")
        key = {"file": "files", "dir": "dirs", "symlink": "symlinks"}.get(kind, "others")
        self.counts[key] += 1
        self.digest.update(entry_line(rel, kind, st.st_mode, st.st_size, content))

    def file_sha(self, name: str, dir_fd: int | None, rel: str, st: os.stat_result) -> str:
        self.size += st.st_size
        if self.size > self.max_bytes:
            raise NotDigested(f"holds over {self.max_bytes >> 30} GiB: too large to digest")
        path = self.root if not rel else f"{self.root}/{rel}"
        before = modelcache.stat_key(st)
        hit = modelcache.lookup(self.entries.get(path), before)
        if hit is not None:
            return hit
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(
                    now.st_mode):
                raise NotDigested(f"{_shown(rel)}: replaced while it was digested")
            digest = sha256_fd(fd)
            after = modelcache.stat_key(os.fstat(fd))
        finally:
            os.close(fd)
        self.read += 1
        if modelcache.cacheable(before, after, time.time_ns(), self.racy_ns) and _utf8(path):
            self.updates[path] = {"stat": list(after), "sha256": digest}
        return digest

    def one(self, name: str, dir_fd: int | None, rel: str, st: os.stat_result,
            depth: int) -> None:
        try:
            self._one(name, dir_fd, rel, st, depth)
        except OSError as e:
            raise NotDigested(f"{_shown(rel)}: cannot be read ({_why(e)})") from None

    def _one(self, name: str, dir_fd: int | None, rel: str, st: os.stat_result,
             depth: int) -> None:
        kind = kind_of(st.st_mode)
        if kind == "file":
            self.add(rel, st, self.file_sha(name, dir_fd, rel, st))
        elif kind == "symlink":
            self.add(rel, st, os.readlink(name, dir_fd=dir_fd))
        elif kind in ("char-device", "block-device"):
            self.add(rel, st, f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
        elif kind != "dir":
            self.add(rel, st, "")
        else:
            if depth > MAX_DEPTH:
                raise NotDigested(f"{_shown(rel)}: folders deeper than {MAX_DEPTH} levels")
            self.add(rel, st, "")
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                now = os.fstat(fd)
                if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                    raise NotDigested(f"{_shown(rel)}: replaced while it was digested")
                self.folder(fd, rel, depth)
            finally:
                os.close(fd)

    def folder(self, fd: int, rel: str, depth: int) -> None:
        names = []
        with os.scandir(fd) as it:
            for e in it:
                names.append(e.name)
                if self.seen + len(names) > self.max_entries:
                    raise NotDigested(f"holds over {self.max_entries} entries: too many "
                                      "to digest")
        for name in sorted(names, key=lambda n: n.encode("utf-8", "surrogateescape")):
            child = f"{rel}/{name}" if rel else name
            self.one(name, fd, child, os.stat(name, dir_fd=fd, follow_symlinks=False),
                     depth + 1)


def _why(e: OSError) -> str:
    return e.strerror or errno.errorcode.get(e.errno or 0, type(e).__name__)


def _shown(rel: str) -> str:
    return printable(rel)[:300] or "the mount's own path"


def _utf8(path: str) -> bool:
    """Whether a path can be a key of the cache file (UTF-8 JSON)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def digest_path(real: Path, entries: dict[str, dict], updates: dict[str, dict], *,
                racy_ns: int = modelcache.RACY_NS, max_entries: int = MAX_ENTRIES,
                max_bytes: int = MAX_BYTES) -> dict:
    """{"digest", "kind", "counts", "bytes", "read"} of what `real` holds (absent is what
    it held, digested too); NotDigested or OSError when it cannot be known. `entries` is
    the stat cache; `updates` receives what may be stored back."""
    walk = _Hasher(os.fspath(real), entries, updates, racy_ns, max_entries, max_bytes)
    try:
        st = os.lstat(real)
        kind = kind_of(st.st_mode)
        walk.one(os.fspath(real), None, "", st, 0)
    except FileNotFoundError:  # only lstat's: the walk says NotDigested
        kind = "absent"
        walk.digest.update(entry_line("", "absent", 0, 0, ""))
    return {"digest": "sha256:" + walk.digest.hexdigest(), "kind": kind,
            "counts": walk.counts, "bytes": walk.size, "read": walk.read}


def digest_mount(mount: Mount, control_dir: Path, allowed: Allowed,
                 entries: dict[str, dict], updates: dict[str, dict], **limits: int
                 ) -> MountDigest:
    """One mount's digest, or why not known. A source where no mount may go is never read:
    the launch refuses it."""
    source = resolve(mount.source, control_dir)
    real = Path(os.path.realpath(source))
    base = {"target": mount.target, "source": printable(str(source)),
            "real": printable(str(real)),
            "read_only": mount.read_only, "sealed": mount.sealed}
    if not allowed(real):
        return MountDigest(**base, digest=None, why=f"{base['real'][:300]} is where "
                           "no mount may go (the launch refuses it): not read")
    began = time.monotonic()
    try:
        found = digest_path(real, entries, updates, **limits)
    except (NotDigested, OSError) as e:
        why = str(e) if isinstance(e, NotDigested) else f"the mount cannot be read ({_why(e)})"
        return MountDigest(**base, digest=None, why=why, seconds=time.monotonic() - began)
    return MountDigest(**base, digest=found["digest"], kind=found["kind"],
                       counts=found["counts"], size=found["bytes"], read=found["read"],
                       seconds=time.monotonic() - began)


def digest_mounts(control: Control, control_file: Path, allowed: Allowed,
                  cache: Path | None, **limits: int) -> tuple[MountDigest, ...]:
    """The digest of each mount the source seal does not cover, in the control's order;
    the stat cache `cache` (None: none) is read once and written once."""
    mounts = [m for m in control.mounts if digested(m.read_only, m.sealed)]
    if not mounts:
        return ()
    entries = modelcache.load(cache) if cache is not None else {}
    updates: dict[str, dict] = {}
    out = tuple(digest_mount(m, control_file.parent, allowed, entries, updates, **limits)
                for m in mounts)
    if cache is not None and updates:
        modelcache.save(cache, updates)
    return out

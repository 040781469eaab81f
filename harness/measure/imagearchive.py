"""What a `docker save` archive holds, read safely: no extraction, bounded, no registry.

Before its sha256 is recorded, an archive must prove it holds the pinned Id: a blob in it
must hash to the Id (the config for the graph-driver store, the manifest or index for
containerd), so a hostile manifest cannot name an Id it does not carry."""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import stat
import tarfile
import zlib
from pathlib import Path
from typing import IO, Any

from harness.base.errors import InvalidInput
from harness.base.hashing import sha256_fd

MAX_MEMBERS = 200_000
MAX_JSON = 1 << 20  # manifest.json, index.json
MAX_BLOB = 16 << 20  # an image config or OCI manifest/index
MAX_BLOBS = 64  # configs and manifests hashed per archive


def _norm(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name


class _Members:
    """Regular-file members by name; names that occur twice are ambiguous, never guessed."""

    def __init__(self, tf: tarfile.TarFile, where: str) -> None:
        self.tf, self.where = tf, where
        self.files: dict[str, tarfile.TarInfo] = {}
        self.twice: set[str] = set()
        seen: set[str] = set()
        for count, m in enumerate(iter(tf.next, None), 1):
            if count > MAX_MEMBERS:
                raise InvalidInput(f"{where}: more than {MAX_MEMBERS} members; not an image "
                                   "archive this command reads")
            name = _norm(m.name)
            if name in seen:
                self.twice.add(name)
            seen.add(name)
            if m.isfile():
                self.files[name] = m
        tf.members = []  # the index above is all we keep

    def read(self, name: str, limit: int) -> bytes | None:
        if name in self.twice:
            raise InvalidInput(f"{self.where}: two members are named {name!r}; which one "
                               "docker load uses is not defined, so the archive is refused")
        m = self.files.get(name)
        if m is None:
            return None
        if m.size > limit:
            raise InvalidInput(f"{self.where}: member {name!r} is {m.size} bytes, more than "
                               f"{limit} allowed")
        f = self.tf.extractfile(m)
        return f.read(limit) if f is not None else b""


def _json(members: _Members, name: str) -> Any:
    raw = members.read(name, MAX_JSON)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise InvalidInput(f"{members.where}: {name} is not valid JSON ({e})") from None


def _ids_from_blobs(members: _Members, names: list[str]) -> set[str]:
    ids = set()
    for name in sorted({_norm(n) for n in names})[:MAX_BLOBS]:
        data = members.read(name, MAX_BLOB)
        if data is not None:
            ids.add("sha256:" + hashlib.sha256(data).hexdigest())
    return ids


def image_ids(fileobj: IO[bytes], where: str) -> set[str]:
    """The image Ids an archive can give back through `docker load`, each proven by a hash."""
    try:
        with tarfile.open(fileobj=fileobj, mode="r:*") as tf:
            members = _Members(tf, where)
            manifest = _json(members, "manifest.json")
            index = _json(members, "index.json")
            if manifest is None and index is None:
                raise InvalidInput(f"{where}: no manifest.json or index.json; not a "
                                   "`docker save` archive")
            blobs: list[str] = []
            if isinstance(manifest, list):
                blobs += [e["Config"] for e in manifest
                          if isinstance(e, dict) and isinstance(e.get("Config"), str)]
            if isinstance(index, dict) and isinstance(index.get("manifests"), list):
                for d in index["manifests"]:
                    digest = d.get("digest") if isinstance(d, dict) else None
                    if isinstance(digest, str) and digest.startswith("sha256:"):
                        blobs.append("blobs/sha256/" + digest.removeprefix("sha256:"))
            return _ids_from_blobs(members, blobs)
    except tarfile.ReadError:
        raise InvalidInput(f"{where}: not a tar archive (plain, gzip, bzip2 or xz)") from None
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as e:
        said = str(e).splitlines()[0] if str(e) else ""
        raise InvalidInput(f"{where}: not a readable tar archive ({type(e).__name__}: "
                           f"{said})") from None


def inspect_archive(path: Path) -> tuple[str, set[str]]:
    """(hex sha256 of the file, the Ids it holds), both from one open file description."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO never blocks
    except OSError as e:
        raise InvalidInput(f"--archive {path}: cannot open ({e.strerror or e})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(f"--archive {path}: not a regular file")
        digest = sha256_fd(fd)
        os.lseek(fd, 0, os.SEEK_SET)
        with os.fdopen(os.dup(fd), "rb") as f:
            return digest, image_ids(f, f"--archive {path}")
    finally:
        os.close(fd)

"""The image lock: names pinned to full image Ids. Nothing launches by tag.

The I/O shell around `harness.measure.imagepin` (the pure rules): engine look-ups, the archive
check, and the locked read-modify-write of images.lock.

A `docker save` archive is read safely: no extraction, bounded, no registry. Before its
sha256 is recorded it must prove it holds the pinned Id: a blob in it must hash to the Id
(the config for the graph-driver store, the manifest or index for containerd), so a hostile
manifest cannot name an Id it does not carry.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import pwd
import re
import stat
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from harness.base import flock
from harness.base.atomic import write_text
from harness.base.catalogue import ENV_MISSING_IMAGE, IMAGE_ARCHIVE_MISMATCH
from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.base.hashing import sha256_fd
from harness.base.timeutil import utc_now
from harness.config.loader import load_model
from harness.config.schema import ARCHIVE_NAME, ImageArchive, ImageLock, LockedImage
from harness.measure import engine, imagepin
from harness.measure.imagestore import image_store

HEADER = ("# images.lock: image names pinned to full image Ids (`harness images pin NAME REF`).\n"
          "# A launch uses the Id, never a tag; a missing image or another Id is refused.\n"
          "# A pin is replaced only with --replace --reason; `history` keeps each change.\n"
          "# archive / repo_digest / build say how to obtain that very Id again.\n")
_REPO_DIGEST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}@sha256:[0-9a-f]{64}")
_STORE = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_MEMBERS = 200_000
MAX_JSON = 1 << 20  # manifest.json, index.json
MAX_BLOB = 16 << 20  # an image config or OCI manifest/index
MAX_BLOBS = 64  # configs and manifests hashed per archive


@dataclass(frozen=True)
class ImageCheck:
    name: str
    expected: str
    found: str | None
    advice: str = ""

    @property
    def ok(self) -> bool:
        return self.found == self.expected

    def describe(self) -> str:
        if self.found is None:
            return f"{self.name}: image {self.expected} is not in the local engine; {self.advice}"
        if not self.ok:
            return (f"{self.name}: local image is {self.found}, images.lock pins "
                    f"{self.expected}; {self.advice}")
        return f"{self.name}: {self.expected} present"


def compare(name: str, pinned: LockedImage, inspect: dict | None) -> ImageCheck:
    """Pure: the pinned Id against what the engine reports (None: absent)."""
    return ImageCheck(name, pinned.id, None if inspect is None else inspect.get("Id"),
                      imagepin.how_to_obtain(pinned.model_dump()))


def read(path: Path) -> ImageLock:
    lock, _, faults = load_model(path, ImageLock)
    if lock is None:
        raise InvalidInput(f"{path}: not a valid image lock", faults=[str(f) for f in faults])
    return lock


def render(lock: ImageLock) -> str:
    data = {"images": {name: img.model_dump(exclude_defaults=True)
                       for name, img in sorted(lock.images.items())}}
    # Field order, not alphabetical: the Id first, the history last.
    return HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def check_one(name: str, pinned: LockedImage) -> ImageCheck:
    # Look up by Id, never by the informational ref: the ref may have moved.
    return compare(name, pinned, engine.local_image(pinned.id))


def current_user() -> str:
    """Who replaced a pin, from the uid (not $USER, which any process can set)."""
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
    return f"{name} (uid {uid})" if name.isprintable() and name.strip() else f"uid {uid}"


@contextmanager
def _locked_folder(folder: Path) -> Iterator[None]:
    """Serialise pins of one images.lock: two at once must not lose a history entry."""
    try:
        fd = flock.open_folder(folder, follow_symlinks=True)
    except OSError as e:
        raise InvalidInput(f"{folder}: cannot use this folder for images.lock "
                           f"({e.strerror or e})") from None
    with flock.holding(fd, timeout=None):  # a pin is quick: wait for the one before
        yield


def _archive(path: Path, image_id: str) -> ImageArchive:
    if not re.fullmatch(ARCHIVE_NAME, path.name):
        raise InvalidInput(f"--archive {path}: the file name must match {ARCHIVE_NAME} "
                           "(it is printed in advice); rename the file")
    digest, ids = inspect_archive(path)
    if image_id not in ids:
        held = ", ".join(sorted(ids)) or "no image Id a blob in it proves"
        raise Refused(f"--archive {path} does not hold image {image_id} (it holds: {held}); "
                      "its sha256 is not recorded", rule=IMAGE_ARCHIVE_MISMATCH)
    return ImageArchive(sha256=digest, name=path.name)


def pin(path: Path, name: str, ref: str, *, replace: bool = False, reason: str | None = None,
        archive: Path | None = None, build: str | None = None) -> imagepin.PinDecision:
    """Record the Id of a locally present image under `name`; see imagepin.decide_pin."""
    imagepin.check_name(name)
    imagepin.check_ref(ref)
    imagepin.check_request(replace, reason)
    if build is not None:
        imagepin.check_text(build, "--build")
    info = engine.local_image(ref)
    if info is None:
        raise EnvironmentFault(f"no local image {ref!r}: build or load it first "
                               "(no registry is used)", rule=ENV_MISSING_IMAGE)
    image_id = str(info.get("Id"))
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", image_id):
        raise EnvironmentFault(f"the engine reports Id {image_id!r} for {ref!r}, not a full "
                               "sha256 Id; nothing pinned")
    digests = [d for d in info.get("RepoDigests") or [] if _REPO_DIGEST.fullmatch(str(d))]
    store = image_store(engine.client().info())
    new = LockedImage(id=image_id, ref=ref, repo_digest=digests[0] if digests else None,
                      store=store if _STORE.fullmatch(store) else None,
                      archive=_archive(archive, image_id) if archive else None, build=build)
    with _locked_folder(path.absolute().parent):
        lock = read(path) if path.exists() else ImageLock()
        decision = imagepin.decide_pin(name, lock.images.get(name), new, replace=replace,
                                       reason=reason, user=current_user(), at=utc_now())
        if decision.write:
            write_text(path, render(ImageLock(images={**lock.images, name: decision.entry})))
    return decision


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

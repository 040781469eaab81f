"""The image lock: names pinned to full image Ids. Nothing launches by tag.

The I/O shell around `harness.measure.imagepin` (the pure rules): engine look-ups, the archive
check, and the locked read-modify-write of images.lock.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.base import flock
from harness.base.atomic import write_text
from harness.base.catalogue import ENV_MISSING_IMAGE, IMAGE_ARCHIVE_MISMATCH
from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.base.timeutil import utc_now
from harness.config.loader import load_model
from harness.config.schema import ARCHIVE_NAME, ImageArchive, ImageLock, LockedImage
from harness.measure import engine, imagearchive, imagepin
from harness.measure.imagestore import image_store

HEADER = ("# images.lock: image names pinned to full image Ids (`harness images pin NAME REF`).\n"
          "# A launch uses the Id, never a tag; a missing image or another Id is refused.\n"
          "# A pin is replaced only with --replace --reason; `history` keeps each change.\n"
          "# archive / repo_digest / build say how to obtain that very Id again.\n")
_REPO_DIGEST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}@sha256:[0-9a-f]{64}")
_STORE = re.compile(r"[A-Za-z0-9._-]{1,64}")


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
    digest, ids = imagearchive.inspect_archive(path)
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

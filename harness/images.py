"""The image lock: names pinned to full image Ids. Nothing launches by tag."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from harness import engine
from harness.atomic import write_text
from harness.config.loader import load_model
from harness.config.schema import ImageLock, LockedImage
from harness.errors import EnvironmentFault, InvalidInput

HEADER = ("# images.lock: image names pinned to full image Ids (`harness images pin NAME REF`).\n"
          "# A launch uses the Id, never a tag; a missing image or another Id is refused.\n")


@dataclass(frozen=True)
class ImageCheck:
    name: str
    expected: str
    found: str | None

    @property
    def ok(self) -> bool:
        return self.found == self.expected

    def describe(self) -> str:
        if self.found is None:
            return f"{self.name}: image {self.expected} is not in the local engine"
        if not self.ok:
            return f"{self.name}: local image is {self.found}, images.lock pins {self.expected}"
        return f"{self.name}: {self.expected} present"


def compare(name: str, pinned: LockedImage, inspect: dict | None) -> ImageCheck:
    """Pure: the pinned Id against what the engine reports (None: absent)."""
    return ImageCheck(name, pinned.id, None if inspect is None else inspect.get("Id"))


def read(path: Path) -> ImageLock:
    lock, _, faults = load_model(path, ImageLock)
    if lock is None:
        raise InvalidInput(f"{path}: not a valid image lock", faults=[str(f) for f in faults])
    return lock


def render(lock: ImageLock) -> str:
    data = {"images": {name: {k: v for k, v in img.model_dump().items() if v is not None}
                       for name, img in sorted(lock.images.items())}}
    return HEADER + yaml.safe_dump(data, sort_keys=True, default_flow_style=False)


def check_one(name: str, pinned: LockedImage) -> ImageCheck:
    # Look up by Id, never by the informational ref: the ref may have moved.
    return compare(name, pinned, engine.local_image(pinned.id))


def pin(path: Path, name: str, ref: str) -> LockedImage:
    """Record the Id of a locally present image under `name`."""
    info = engine.local_image(ref)
    if info is None:
        raise EnvironmentFault(f"no local image {ref!r}: build or load it first "
                               "(no registry is used)", rule="ENV-MISSING-IMAGE")
    digests = info.get("RepoDigests") or []
    entry = LockedImage(id=info["Id"], ref=ref, repo_digest=digests[0] if digests else None,
                        store=engine.image_store())
    lock = read(path) if path.exists() else ImageLock()
    images = dict(lock.images)
    images[name] = entry
    write_text(path, render(ImageLock(images=images)))
    return entry

"""Pure rules for image pins: what a pin request does, and how to obtain a pinned image.

A pin is what every launch trusts, so replacing one needs `--replace --reason` and leaves
a history entry; advice for a missing image names how to get *that* Id back."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from harness.base.catalogue import IMAGE_PIN_EXISTS
from harness.base.errors import InvalidInput, Refused
from harness.config.schema import (
    IMAGE_REF,
    SAFE_NAME,
    ImageRef,
    LockedImage,
    NameField,
    OneLine,
    PinChange,
)

Action = Literal["new", "same", "replace"]


def _valid(kind: Any, value: str, what: str, rule: str) -> None:
    try:
        _adapter(kind).validate_python(value)
    except ValidationError as e:
        why = e.errors()[0]
        said = rule if why["type"] == "string_pattern_mismatch" else why["msg"].removeprefix(
            "Value error, ")
        shown = repr(value) if len(value) <= 80 else repr(value[:77]) + "..."
        raise InvalidInput(f"{what} {shown}: {said}") from None


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    """Built at the first check: a run imports this module and never checks a pin."""
    return TypeAdapter(kind)


def check_name(name: str) -> None:
    """NAME exactly as images.lock will validate it (exit 2 before anything is looked up)."""
    _valid(NameField, name, "image name", "must be 1 to 64 letters, digits, '.', '_' or '-', "
           f"starting with a letter or digit ({SAFE_NAME})")


def check_ref(ref: str) -> None:
    """REF: a non-empty, single-line image reference or Id (exit 2, never an engine error)."""
    if not ref:
        raise InvalidInput("image reference '': must not be empty (give a tag such as "
                           "name:tag, name@sha256:..., or an image Id)")
    _valid(ImageRef, ref, "image reference", "must be one line of letters, digits, '.', '_', "
           f"':', '/', '@' or '-': a tag, name@sha256:... or an image Id ({IMAGE_REF})")


def check_text(value: str, what: str) -> None:
    _valid(OneLine, value, what, "must be one line of printable text")


def check_request(replace: bool, reason: str | None) -> None:
    """`--replace` and `--reason` come together; the reason is one printable line."""
    if replace != (reason is not None):
        raise InvalidInput("--replace and --reason TEXT go together: replacing a pin needs "
                           "both, and a reason only describes a replacement")
    if reason is not None:
        check_text(reason, "--reason")


@dataclass(frozen=True)
class PinDecision:
    """What `harness images pin` does: the resulting entry, and whether to write it."""

    action: Action
    entry: LockedImage
    write: bool
    old_id: str | None = None

    def describe(self, name: str) -> list[str]:
        e = self.entry
        source = f"ref {e.ref}" if e.ref else "no ref"
        if self.action == "new":
            return [f"{name}: pinned {e.id} ({source}, store {e.store})"]
        if self.action == "same":
            what = "source info updated" if self.write else "no change"
            return [f"{name}: already pinned to {e.id}; {what}"]
        last = e.history[-1]
        return [f"{name}: pin replaced ({source}, store {e.store})",
                f"  old: {self.old_id}", f"  new: {e.id}",
                f"  reason: {last.reason} (by {last.user} at {last.at})"]


def decide_pin(name: str, old: LockedImage | None, new: LockedImage, *, replace: bool,
               reason: str | None, user: str, at: str) -> PinDecision:
    """Decide a pin request given the current entry (None: not pinned).

    The same Id changes nothing but may gain an --archive or --build. Another Id is refused
    (exit 1) unless `replace` with a `reason`; then the entry keeps the old history plus this
    change, and none of the old entry's source info."""
    check_request(replace, reason)
    if old is None:
        return PinDecision("new", new.model_copy(update={"history": []}), True)
    if old.id == new.id:
        keep = {k: getattr(new, k) for k in ("archive", "build") if getattr(new, k) is not None}
        merged = old.model_copy(update=keep)
        return PinDecision("same", merged, merged != old, old.id)
    if not replace:
        raise Refused(
            f"images.lock pins {name} to {old.id}; the local image is {new.id}. A pin is "
            "never replaced silently: if the new image is approved, run again with "
            "--replace --reason TEXT (both Ids and the reason are kept in its history); if "
            "not, keep the pin and " + how_to_obtain(old.model_dump()),
            rule=IMAGE_PIN_EXISTS)
    change = PinChange(at=at, old=old.id, new=new.id, reason=reason or "", user=user)
    entry = new.model_copy(update={"history": [*old.history, change]})
    return PinDecision("replace", entry, True, old.id)


def how_to_obtain(entry: Mapping[str, Any]) -> str:
    """How to get *that* Id back; never "re-pin", which would launch an unapproved image."""
    ways = []
    archive = entry.get("archive") or {}
    if archive.get("sha256"):
        file = archive.get("name") or "<the archive>"
        ways.append(f"docker load -i {file} (archive sha256 {archive['sha256']})")
    if entry.get("repo_digest"):
        ways.append(f"on a host with a registry: docker pull {entry['repo_digest']}")
    if entry.get("build"):
        ways.append(f"rebuild it reproducibly: {entry['build']}")
    if not ways:
        ways = ["images.lock records no source for this Id (no archive, repo digest or "
                "build), so get that exact image from whoever pinned it (their docker save "
                "archive, say)"]
    return "obtain that image: " + "; or ".join(ways) + "; then check with harness images verify"

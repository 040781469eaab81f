"""The approval document and the pure matching of a run against it.

A run matches on the sealed bytes (seal, image Ids, model pins), never on the commit id."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness.base.catalogue import (
    APPROVAL_DIRTY_TREE,
    APPROVAL_IMAGE_CHANGED,
    APPROVAL_INVALID,
    APPROVAL_MODEL_CHANGED,
    APPROVAL_OTHER_SEAL,
)
from harness.base.tree import printable
from harness.config.loader import Loaded
from harness.instrument.harness_observer.encode import loads as strict_loads

SCHEMA = "harness.approval/v1"
APPROVALS_DIR = "approvals"  # in the project, beside campaigns/; never part of the seal
LIMIT = 1024 * 1024
SEAL = re.compile(r"^sha256:[0-9a-f]{64}$")
Finding = tuple[str, str]  # (rule, detail)


def file_name(campaign: str, seal: str) -> str:
    """approvals/<campaign>-<first 12 hex of the seal>.json: one file per approved seal."""
    return f"{campaign}-{seal.removeprefix('sha256:')[:12]}.json"


@dataclass(frozen=True)
class Pins:
    """What a run is made of, as an approval names it."""

    seal: str
    images: dict[str, str]  # image name -> Id, for the campaign's controls
    models: dict[str, dict[str, str]]  # control -> {relative file: sha256}


def _hex(value: str) -> str:
    return value if value.startswith("sha256:") else "sha256:" + value


def pins_of(loaded: Loaded, seal: str) -> Pins:
    """The campaign's pins as loaded: image Ids from images.lock, each control's model pins."""
    lock = loaded.image_lock.images if loaded.image_lock else {}
    images, models = {}, {}
    for name, (ctl, _) in sorted(loaded.controls.items()):
        pinned = lock.get(ctl.image)
        images[ctl.image] = pinned.id if pinned else None
        if ctl.model is not None:
            models[name] = {rel: _hex(h) for rel, h in sorted(ctl.model.sha256.items())}
    return Pins(seal, images, models)


def build(campaign: dict[str, str], pins: Pins, git: dict[str, Any], gates: dict[str, Any],
          reviewer: str, at: str, harness: dict[str, Any] | None = None) -> dict[str, Any]:
    """The approval document (pure)."""
    doc = {"schema": SCHEMA, "campaign": campaign, "source_seal": pins.seal,
           "images": pins.images, "models": pins.models,
           "git": {"commit": git.get("commit"), "dirty": git.get("dirty")},
           "gates": gates, "reviewer": reviewer, "approved_at": at}
    if harness is not None:
        doc["harness"] = harness
    return doc


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str | None) for v in value.values())


def parse(data: bytes) -> dict[str, Any]:
    """An approval file's bytes as a document; ValueError naming what is wrong."""
    try:
        doc = strict_loads(data.decode("utf-8"))
    except ValueError as e:  # not UTF-8, or encode.DecodeError
        raise ValueError(f"not strict JSON ({printable(str(e))[:200]})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document")
    seal, gates = doc.get("source_seal"), doc.get("gates")
    if not (isinstance(seal, str) and SEAL.match(seal)):
        raise ValueError("source_seal is not sha256:<64 hex>")
    if not _str_map(doc.get("images")) or not isinstance(doc.get("models"), dict):
        raise ValueError("images or models is not a mapping")
    if not all(_str_map(m) for m in doc["models"].values()):
        raise ValueError("a control's model pins are not a mapping of digests")
    if not isinstance(doc.get("git"), dict) or not isinstance(gates, dict):
        raise ValueError("git or gates is not an object")
    if not (isinstance(gates.get("record"), str) and isinstance(gates.get("digest"), str)):
        raise ValueError("gates names no record and digest")
    return doc


def _map_changes(kind: str, approved: dict, now: dict) -> list[str]:
    out = []
    for key in sorted(set(approved) | set(now), key=str):
        a, b = approved.get(key), now.get(key)
        if a != b:
            out.append(f"{kind} {printable(str(key))}: approved {printable(str(a))}, "
                       f"now {printable(str(b))}")
    return out


def match(doc: dict[str, Any], pins: Pins) -> list[Finding]:
    """Why a parsed approval does not cover a run with `pins` (empty: it does). Pure. A changed
    pin is named as such (it also changes the seal); another seal, same pins, is
    APPROVAL-OTHER-SEAL."""
    found: list[Finding] = []
    found += [(APPROVAL_IMAGE_CHANGED, c) for c in _map_changes("image", doc["images"],
                                                                pins.images)]
    found += [(APPROVAL_MODEL_CHANGED, c) for c in _map_changes("model of", doc["models"],
                                                                pins.models)]
    if not found and doc["source_seal"] != pins.seal:
        found.append((APPROVAL_OTHER_SEAL, f"approved {doc['source_seal']}, this run's seal "
                                           f"is {pins.seal}"))
    return found + reviewed_commit(doc)


def reviewed_commit(doc: dict[str, Any]) -> list[Finding]:
    """Pure: an approval must say it was made from a checkout clean at a named commit."""
    git = doc["git"]
    if git.get("dirty") is not False or not isinstance(git.get("commit"), str):
        return [(APPROVAL_DIRTY_TREE, f"approved at commit {printable(str(git.get('commit')))}"
                                      f" with dirty={printable(str(git.get('dirty')))}")]
    return []


def invalid(where: str, why: str) -> Finding:
    return (APPROVAL_INVALID, f"{printable(where)}: {why}")


def refusal_text(found: list[Finding]) -> tuple[str, str]:
    """Pure: (the first rule, one line of every finding) for a refusal naming the first
    rule: the CLI prints it as `[RULE] text`, so a finding of that rule is its bare
    detail and any other one `RULE: detail`; a rule is never printed twice in a row."""
    first = found[0][0]
    return first, "; ".join(detail if rule == first else f"{rule}: {detail}"
                            for rule, detail in found)

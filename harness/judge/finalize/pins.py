"""Pinned enum definitions (harness/data/enums.json): the only grounds on which a legacy
enum name and a legacy enum value count as the same member."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from harness.instrument.harness_observer.encode import canonical

ENUM_KEYS = {"$enum", "name", "value"}


@dataclass(frozen=True)
class Member:
    """An enum member, its value in canonical text so `3` and `3.0` never meet."""

    enum: str
    name: str
    value: str


def load_pins(text: str | None = None) -> dict[str, Any]:
    """The shipped pins, or the pins in `text` (tests hand their own)."""
    if text is None:
        return json.loads(resources.files("harness").joinpath("data/enums.json").read_bytes())
    return json.loads(text)


def _legacy_name(raw: str, enum_type: str) -> str:
    """`VLLM_COMPILE`, or Python 3.10's str() form `CompilationMode.VLLM_COMPILE`."""
    short = enum_type.rpartition(".")[2] + "."
    return raw[len(short):] if raw.startswith(short) else raw


def member_of(field: str, raw: Any, pins: dict[str, Any]) -> Member | None:
    """The member an observed value denotes, or None when it denotes none we can prove.

    A typed `$enum` names its member itself. A legacy name or value is resolved only for
    a field the pins map to an enum, and only to a member those pins list."""
    if isinstance(raw, dict) and set(raw) == ENUM_KEYS:
        return Member(raw["$enum"], raw["name"], canonical(raw["value"]))
    enum_type = pins["fields"].get(field)
    if enum_type is None:
        return None
    members = pins["enums"][enum_type]["members"]
    if isinstance(raw, str):
        name = _legacy_name(raw, enum_type)
        if name in members:
            return Member(enum_type, name, canonical(members[name]))
        return None
    text = canonical(raw)
    for name, value in members.items():
        if canonical(value) == text:
            return Member(enum_type, name, text)
    return None

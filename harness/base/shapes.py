"""Shapes of values read from hostile JSON: a value that should be an object and is not is
read as an empty one, so a reader asks for keys without a type check at every step."""

from __future__ import annotations

from typing import Any


def dict_or_empty(value: Any) -> dict:
    """`value` when it is a dict, else an empty dict. Pure."""
    return value if isinstance(value, dict) else {}

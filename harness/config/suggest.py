""""Did you mean": the known key nearest to an unknown one, read from the schema itself.

Pure: walks the pydantic model along the error's location to the mapping that refused the
key, so the suggestion is always a key that mapping accepts (an alias where it has one).
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold: X, X | None, list[X], dict[str, X],
    Annotated[X, ...] (a location walks through containers by index or key)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None:
        return []
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _models_in(args[0])
    if origin in (typing.Union, types.UnionType, list, tuple, dict):
        return [m for a in (args[1:] if origin is dict else args) for m in _models_in(a)]
    return []


def _is_mapping(annotation: Any) -> bool:
    """Whether the location's next part is a key of a dict, not a field name."""
    origin = typing.get_origin(annotation)
    if origin is dict:
        return True
    if origin in (typing.Annotated, typing.Union, types.UnionType):
        return any(_is_mapping(a) for a in typing.get_args(annotation))
    return False


def keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that owns the mapping at `loc` (None when the path leaves the schema)."""
    current: type[BaseModel] | None = model
    key_next = False
    for part in loc:
        if current is None:
            return None
        if key_next or not isinstance(part, str):
            key_next = False
            continue  # a list index or dict key: the element type was taken already
        field = {f.alias or n: f for n, f in current.model_fields.items()}.get(part)
        if field is None:
            return None
        found = _models_in(field.annotation)
        current = found[0] if found else None
        key_next = _is_mapping(field.annotation)
    return current


def did_you_mean(model: type[BaseModel], loc: tuple[Any, ...]) -> str | None:
    """For an unknown key at `loc` (its last part), the nearest accepted key, if any."""
    if not loc or not isinstance(loc[-1], str):
        return None
    owner = model_at(model, loc[:-1])
    if owner is None:
        return None
    match = difflib.get_close_matches(loc[-1], keys_of(owner), n=1, cutoff=0.6)
    return match[0] if match else None


def nearest(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """The choice nearest to a mistyped name (a control, an image), if one is near."""
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def hint(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """" (did you mean 'x'?)" or ""."""
    near = nearest(word, choices)
    return f" (did you mean {near!r}?)" if near else ""

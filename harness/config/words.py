"""Validation errors in words an operator can act on, instead of pydantic's regexes and
type names: each schema pattern has a sentence (a test checks none is missed), the offending
value quoted, bounded. Pure.
"""

from __future__ import annotations

from typing import Any

from harness.config.schema import ARCHIVE_NAME, IMAGE_REF, SAFE_NAME

HEX64 = "64 lowercase hex digits"
PATTERN_WORDS: dict[str, str] = {
    SAFE_NAME: "a name of 1 to 64 letters, digits, '.', '_' or '-' that starts with a letter "
               "or digit",
    r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$": "a name of 1 to 64 letters, digits, '_' or '-' that "
                                         "starts with a letter or digit",
    r"^[A-Za-z0-9._-]{1,64}$": "1 to 64 letters, digits, '.', '_' or '-'",
    r"^sha256:[0-9a-f]{64}$": f"a full image Id: 'sha256:' then {HEX64}",
    r"^(sha256:)?[0-9a-f]{64}$": f"a sha256 digest: {HEX64}, optionally after 'sha256:'",
    r"^[0-9a-f]{64}$": f"a sha256 digest: {HEX64}",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name: letters, digits and '_', "
                                 "not starting with a digit",
    r"^[0-9]{1,3}(,[0-9]{1,3}){0,63}$": "GPU indices separated by commas, such as 0 or 0,1",
    r"^[0-9a-z_][0-9a-z_-]*(:[0-9a-z_-]+)?$": "a user, optionally with ':group', in lowercase "
                                              "letters, digits, '_' or '-', such as 1000:1000",
    r"^gfx[0-9a-f]+$": "a gfx target such as gfx1100",
    IMAGE_REF: "an image reference such as name:tag (letters, digits and '._:/@-', at most "
               "512 characters)",
    r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}@sha256:[0-9a-f]{64}$":
        f"a repo digest: the repository name, '@sha256:', then {HEX64}",
    ARCHIVE_NAME: "a file name of letters, digits, '.', '_', '+' or '-' that starts with a "
                  "letter or digit",
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$": "a UTC time such as 2026-11-30T08:30:00Z",
}
SHAPES = {  # pydantic error type -> what the YAML should have held
    "model_type": "a mapping (indented `key: value` lines)",
    "model_attributes_type": "a mapping (indented `key: value` lines)",
    "dict_type": "a mapping (indented `key: value` lines)",
    "list_type": "a list (lines starting with `- `, or [a, b])",
    "tuple_type": "a list (lines starting with `- `, or [a, b])",
    "string_type": "text (quote it if YAML reads it as a number, a date or true/false)",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}
VALUE_CHARS = 60


def shown(value: Any) -> str:
    """The refused value, quoted and cut so a huge one cannot flood the terminal."""
    text = repr(value)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 3] + "..."


def where(loc: tuple[Any, ...]) -> str:
    """`env.1BAD.[key]` reads as `env: the key '1BAD'`; `gates.0.run.0` stays as it is."""
    parts = [str(p) for p in loc]
    if parts and parts[-1] == "[key]":
        head = ".".join(parts[:-2])
        return f"{head}: the key {parts[-2]!r}" if head else f"the key {parts[-2]!r}"
    return ".".join(parts)


def expected(err: dict[str, Any]) -> str | None:
    """What the value should have been, in words, or None to keep pydantic's message
    (bounds, choices and our own validators already read well)."""
    kind = err.get("type")
    if kind == "string_pattern_mismatch":
        pattern = (err.get("ctx") or {}).get("pattern")
        words = PATTERN_WORDS.get(str(pattern), "a value of another form")
        return f"expected {words}, got {shown(err.get('input'))}"
    if kind in ("literal_error", "enum") and (err.get("ctx") or {}).get("expected"):
        return f"expected {err['ctx']['expected']}, got {shown(err.get('input'))}"
    if kind in SHAPES:
        return f"expected {SHAPES[kind]}, got {shown(err.get('input'))}"
    return None

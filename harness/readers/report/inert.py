"""Text from evidence made inert for display: one line, no control sequences, bounded.

Evidence holds what a workload typed: an ESC sequence could forge an `accepted` line, a
newline a row, a bidi override the reading order, a lone surrogate breaks UTF-8 output.
Markup escaping stays the renderer's job."""

from __future__ import annotations

import json
from typing import Any

MAX_CHARS = 4000

_INVISIBLE = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F),
              *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C, 0x2028, 0x2029,  # line separators
              *range(0xD800, 0xE000)]  # lone surrogates (JSON "\\ud800") cannot be encoded
_VISIBLE = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _INVISIBLE}


def inert(value: Any, limit: int = MAX_CHARS) -> str:
    """Any JSON value as one line of harmless text: controls escaped, length capped."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError, RecursionError):
            text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit} more characters)"
    return text.translate(_VISIBLE)

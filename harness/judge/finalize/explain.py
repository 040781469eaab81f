"""Human-readable verdict: each differing field with both raw values, and the refusing rules."""

from __future__ import annotations

import json
from typing import Any

from harness.base.reason import Reason


def _raw(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _writable(text: str) -> str:
    """The text with anything UTF-8 cannot hold (a lone surrogate) shown as `\\udXXX`:
    the reader refuses such documents, and a verdict must print whatever it is given."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def render(verdict: dict[str, Any]) -> str:
    lines = [f"gate0: {verdict['verdict']} ({verdict['compared']} fields compared)"]
    lines += [f"  refused by {Reason.of(item).text()}" for item in verdict["reasons"]]
    for d in verdict["differences"]:
        lines.append(f"  {d['field']}: {d['kind']}")
        lines.append(f"    startup:    {_raw(d['startup'])}")
        lines.append(f"    generation: {_raw(d['generation'])}")
    return _writable("\n".join(lines) + "\n")

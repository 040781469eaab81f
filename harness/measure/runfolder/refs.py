"""Run references: a run id, a unique prefix of one, `latest` or `@-N`, found in a runs dir.

As docker takes an id prefix and git a short hash, every command that takes a run folder
also takes a reference resolved here against the names of the runs dir's run folders:
- the whole run id, or a prefix only one run id has (`rehearsal-gate0-2026120`);
- the 8 hex digits that end a run id, or a prefix of them of at least 4 (`ad5ab0af`);
- `latest` (the newest run by the stamp in its id), `@-1` the one before it, `@-2` ...

`resolve_ref` is pure over a list of names; `run_names` is the thin reader: the runs dir's
entries that are real folders (a link is never followed) named like a run id, bounded.
An existing path always wins over a reference; that is the caller's test (`looks_like_ref`).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.names import RUN_ID_MAX, is_name

MAX_NAMES = 100_000  # a runs dir holding more run folders than this is read this far
MAX_CANDIDATES = 10  # an ambiguous prefix lists at most this many
MIN_HEX = 4  # a shorter hex tail prefix matches too much to mean one run
LATEST = "latest"
_SHAPE = re.compile(r"(.+)-(\d{8}T\d{6}Z)-([0-9a-f]{8})")
_BACK = re.compile(r"@-([0-9]{1,6})")


def run_parts(name: str) -> tuple[str, str, str] | None:
    """(control, stamp, hex) of a name minted by RunId.mint, or None. Pure."""
    m = _SHAPE.fullmatch(name)
    return (m.group(1), m.group(2), m.group(3)) if m and is_name(name, RUN_ID_MAX) else None


def newest_first(names: Sequence[str]) -> list[str]:
    """Run folder names newest first: by the UTC stamp in the id, then by name. Pure."""
    shaped = [n for n in names if run_parts(n) is not None]
    return sorted(shaped, key=lambda n: (run_parts(n)[1], n), reverse=True)  # type: ignore[index]


def looks_like_ref(text: str) -> bool:
    """Whether `text` can be a reference (one path component, or `@-N`), not a path."""
    return bool(text) and "/" not in text and text not in (".", "..")


def _ambiguous(ref: str, found: list[str], where: str) -> InvalidInput:
    shown = ", ".join(found[:MAX_CANDIDATES])
    more = f" and {len(found) - MAX_CANDIDATES} more" if len(found) > MAX_CANDIDATES else ""
    control = any(run_parts(n)[0] == ref for n in found)  # type: ignore[index]
    tip = f" (`harness ls --control {ref}` lists that control's runs)" if control else ""
    return InvalidInput(f"run {ref[:200]!r} is ambiguous in {where}: {len(found)} runs match "
                        f"({shown}{more}); give more of the id{tip}")


def _by_age(ref: str, ordered: list[str], where: str) -> str:
    back = 0 if ref == LATEST else int(_BACK.fullmatch(ref).group(1))  # type: ignore[union-attr]
    if back >= len(ordered):
        have = f"it holds {len(ordered)} run(s)" if ordered else "it holds no run"
        raise InvalidInput(f"run {ref!r}: no such run in {where} ({have})")
    return ordered[back]


def resolve_ref(ref: str, names: Sequence[str], where: str) -> str:
    """The one run folder name `ref` means among `names` (newest first or not); InvalidInput
    (exit 2) when none or several match, naming the candidates or the nearest. Pure."""
    ordered = newest_first(names)
    if ref == LATEST or _BACK.fullmatch(ref):
        return _by_age(ref, ordered, where)
    if ref in ordered:
        return ref
    found = [n for n in ordered if n.startswith(ref)]
    if not found and len(ref) >= MIN_HEX and re.fullmatch(r"[0-9a-f]{1,8}", ref):
        found = [n for n in ordered if run_parts(n)[2].startswith(ref)]  # type: ignore[index]
    if len(found) == 1:
        return found[0]
    if found:
        raise _ambiguous(ref, found, where)
    near = next((n for n in ordered if ref in n), None) or next(
        iter(difflib.get_close_matches(ref, ordered[:1000], n=1, cutoff=0.6)), None)
    hint = f"; did you mean {near}?" if near else ""
    raise InvalidInput(f"no run {ref[:200]!r} in {where}{hint} (`harness ls` lists them)")


def run_names(runs_dir: Path, limit: int = MAX_NAMES) -> list[str]:
    """The names of the run folders directly in `runs_dir`: real folders (a link is not
    followed), named like a minted run id, at most `limit`; OSError if it cannot be read."""
    names: list[str] = []
    with os.scandir(runs_dir) as entries:
        for entry in entries:
            if len(names) >= limit:
                break
            if run_parts(entry.name) is not None and entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
    return names


def find_run(ref: str, runs_dir: Path, where: str) -> Path:
    """The run folder `ref` names in `runs_dir` (`where` says which runs dir, and why)."""
    try:
        names = run_names(runs_dir)
    except OSError as e:
        raise InvalidInput(f"cannot read {where}: {e.strerror or e}") from None
    return Path(runs_dir) / resolve_ref(ref, names, where)

"""Run references: the forms a run may be named by on a command line, found in a runs dir.

A run id is `<control>-<UTC stamp>-<8 hex>`; each form matches only its own part of it:
`latest`, `@-1`, `@-2` ...; the whole id (a real folder of that name always wins); a tail
of 4 to 8 hex digits; or an id prefix naming one run. A reference matching more than one
entry, or a tail that also starts an entry's name, is ambiguous (exit 2): a tail must
never reach a run by its control name. An entry named like a run that is not a real
folder is a candidate but never resolved to. An existing path always wins over a
reference (`looks_like_ref`).

Night folders are named by the same grammar less the tail (harness.measure.nightfolder.
naming): `resolve_name` and `entries` serve both."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.names import RUN_ID_MAX, is_name

MAX_NAMES = 100_000  # a runs dir holding more entries named like runs is read this far
MAX_CANDIDATES = 10  # an ambiguous reference lists at most this many
MIN_HEX = 4  # a shorter hex tail prefix matches too much to mean one run
TAIL_HEX = 8  # the hex digits that end a run id
LATEST = "latest"
FOLDER = "a folder"
BY_TAIL, BY_ID, BY_NAME = "by its tail", "by its id", "by its control name, not its tail"
_SHAPE = re.compile(r"(.+)-(\d{8}T\d{6}Z)-([0-9a-f]{8})")
_BACK = re.compile(r"@-([0-9]{1,6})")
_TAIL = re.compile(r"[0-9a-fA-F]{1,8}")
Parts = Callable[[str], "tuple[str, ...] | None"]  # a name's parts, [1] its UTC stamp


class NoMatch(InvalidInput):
    """A reference that names nothing (not several): exit 2, and another kind may be tried."""


def run_parts(name: str) -> tuple[str, str, str] | None:
    """(control, stamp, hex) of a name minted by RunId.mint, or None. Pure."""
    m = _SHAPE.fullmatch(name)
    return (m.group(1), m.group(2), m.group(3)) if m and is_name(name, RUN_ID_MAX) else None


def newest_first(names: Sequence[str], parts: Parts = run_parts) -> list[str]:
    """Names shaped as `parts` reads them, newest first: by their UTC stamp, then by name.
    Pure."""
    shaped = [n for n in names if parts(n) is not None]
    return sorted(shaped, key=lambda n: (parts(n)[1], n), reverse=True)  # type: ignore[index]


def looks_like_ref(text: str) -> bool:
    """Whether `text` can be a reference (one path component, or `@-N`), not a path."""
    return bool(text) and "/" not in text and text not in (".", "..")


def is_tail(ref: str) -> bool:
    """Whether `ref` has the tail's form (hex digits only, at most 8). Pure."""
    return _TAIL.fullmatch(ref) is not None


def _matches(ref: str, name: str) -> str | None:
    """How `ref` matches `name`: BY_TAIL, BY_ID, BY_NAME (a conflict), or None. Pure."""
    if is_tail(ref):
        if run_parts(name)[2].startswith(ref.lower()):  # type: ignore[index]
            return BY_TAIL
        return BY_NAME if name.startswith(ref) else None
    return BY_ID if name.startswith(ref) else None


def _ambiguous(ref: str, found: list[tuple[str, str]], where: str) -> InvalidInput:
    shown = ", ".join(f"{n} ({how})" for n, how in found[:MAX_CANDIDATES])
    more = f" and {len(found) - MAX_CANDIDATES} more" if len(found) > MAX_CANDIDATES else ""
    count = f"{len(found)} runs match" if len(found) > 1 else "1 run matches, not by its tail"
    control = any(run_parts(n)[0] == ref for n, _ in found)  # type: ignore[index]
    tip = f" (`harness ls --control {ref}` lists that control's runs)" if control else ""
    give = ("give more of the tail, or of the run id up to a character that is not a hex "
            "digit" if is_tail(ref) else "give more of the id")
    return InvalidInput(f"run {ref[:200]!r} is ambiguous in {where}: {count} "
                        f"({shown}{more}); {give}{tip}")


def _by_age(ref: str, ordered: list[str], where: str, what: str = "run") -> str:
    back = 0 if ref == LATEST else int(_BACK.fullmatch(ref).group(1))  # type: ignore[union-attr]
    if back >= len(ordered):
        have = f"it holds {len(ordered)} {what}(s)" if ordered else f"it holds no {what}"
        raise NoMatch(f"{what} {ref!r}: no such {what} in {where} ({have})")
    return ordered[back]


def _none(ref: str, ordered: list[str], where: str, what: str, lister: str) -> NoMatch:
    near = next((n for n in ordered if ref in n), None) or next(
        iter(difflib.get_close_matches(ref, ordered[:1000], n=1, cutoff=0.6)), None)
    hint = f"; did you mean {near}?" if near else ""
    return NoMatch(f"no {what} {ref[:200]!r} in {where}{hint} (`{lister}` lists them)")


def resolve_name(ref: str, names: Sequence[str], where: str, parts: Parts,
                 what: str, lister: str) -> str:
    """The one name `ref` means among `names` shaped as `parts` reads them: `latest`, `@-N`,
    the whole name, or a prefix of one. NoMatch or InvalidInput (several: exit 2). Pure."""
    ordered = newest_first(names, parts)
    if ref == LATEST or _BACK.fullmatch(ref):
        return _by_age(ref, ordered, where, what)
    if ref in ordered:
        return ref
    found = [n for n in ordered if n.startswith(ref)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise _none(ref, ordered, where, what, lister)
    more = f" and {len(found) - MAX_CANDIDATES} more" if len(found) > MAX_CANDIDATES else ""
    raise InvalidInput(f"{what} {ref[:200]!r} is ambiguous in {where}: {len(found)} "
                       f"{what}s match ({', '.join(found[:MAX_CANDIDATES])}{more}); give "
                       f"more of the id (`{lister}` lists them)")


def resolve_ref(ref: str, names: Sequence[str], where: str,
                not_folders: Mapping[str, str] | None = None) -> str:
    """The one run folder name `ref` means among `names`; `not_folders` maps other entries
    named like a run to what they are. InvalidInput (exit 2) when none or several match. Pure."""
    ordered = newest_first(names)
    if ref == LATEST or _BACK.fullmatch(ref):
        return _by_age(ref, ordered, where)
    if ref in ordered:
        return ref
    if is_tail(ref) and len(ref) < MIN_HEX:
        raise NoMatch(f"no run {ref!r} in {where}: a tail needs at least {MIN_HEX} of "
                           f"its {TAIL_HEX} hex digits, an id prefix a character that is not "
                           "a hex digit (`harness ls` lists the runs)")
    others = {n: what for n, what in (not_folders or {}).items()
              if run_parts(n) is not None and n not in ordered}
    found = [(n, how) for n in ordered if (how := _matches(ref, n))]
    found += [(n, f"{how}; {what}, never followed")
              for n, what in sorted(others.items()) if (how := _matches(ref, n))]
    if len(found) == 1 and found[0][0] in others:
        name = found[0][0]
        raise InvalidInput(f"run {ref[:200]!r} in {where} is {name}: {others[name]}, not a "
                           "run folder, never followed")
    if len(found) == 1 and found[0][1] in (BY_TAIL, BY_ID):
        return found[0][0]
    if found:
        raise _ambiguous(ref, found, where)
    raise _none(ref, ordered, where, "run", "harness ls")


def _what(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "a symlink"
    return FOLDER if entry.is_dir(follow_symlinks=False) else "not a folder"


def entries(folder: Path, parts: Parts = run_parts, limit: int = MAX_NAMES) -> dict[str, str]:
    """Each entry in `folder` shaped as `parts` reads a name, and what it is (FOLDER,
    "a symlink", "not a folder"; links never followed), at most `limit`; OSError if
    unreadable."""
    found: dict[str, str] = {}
    with os.scandir(folder) as listed:
        for entry in listed:
            if len(found) >= limit:
                break
            if parts(entry.name) is not None:
                found[entry.name] = _what(entry)
    return found


def run_names(runs_dir: Path, limit: int = MAX_NAMES) -> list[str]:
    """The real run folders directly in `runs_dir`, at most `limit`; OSError if unreadable."""
    return [n for n, what in entries(runs_dir, limit=limit).items() if what == FOLDER]


def find_run(ref: str, runs_dir: Path, where: str) -> Path:
    """The run folder `ref` names in `runs_dir` (`where` says which runs dir, and why)."""
    try:
        found = entries(runs_dir)
    except OSError as e:
        raise InvalidInput(f"cannot read {where}: {e.strerror or e}") from None
    names = [n for n, what in found.items() if what == FOLDER]
    others = {n: what for n, what in found.items() if what != FOLDER}
    return Path(runs_dir) / resolve_ref(ref, names, where, others)

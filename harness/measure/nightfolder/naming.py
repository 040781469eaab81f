"""The night folder's names: `RUNS/nights/<campaign>-<UTC stamp>/` and the files in it.

One owner, so a change of form cannot leave a reader looking for the old one."""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.names import RUN_ID_MAX, is_name
from harness.measure.runfolder import refs

NIGHTS = "nights"  # RUNS/nights/<night>: the folder every night of a runs folder is in
JOURNAL_NAME = "journal.sqlite"  # the night's journal (schema.py)
ENDED = "ended.json"  # {"at", "why"}: written when a night ends on purpose, never rewritten
STAMP = r"\d{8}T\d{6}Z"  # harness.base.timeutil.stamp(): 20261130T021500Z
_NAME = re.compile(r"(.+)-(" + STAMP + ")")


def night_name(campaign: str, stamp: str) -> str:
    """The folder name of `campaign`'s night started at `stamp`. Pure."""
    if not re.fullmatch(STAMP, stamp):
        raise ValueError(f"not a UTC stamp: {stamp!r}")
    return f"{campaign}-{stamp}"


def parse_night_name(name: str) -> tuple[str, str] | None:
    """(campaign, stamp) of a night folder's name, or None when it is not one. Pure."""
    match = _NAME.fullmatch(name)
    return (match.group(1), match.group(2)) if match else None


def night_parts(name: str) -> tuple[str, str] | None:
    """(campaign, stamp) of a night folder's name in the safe alphabet, else None: the names
    a night reference may resolve to. Pure."""
    return parse_night_name(name) if is_name(name, RUN_ID_MAX) else None


def find_night(ref: str, runs_dir: Path, where: str) -> Path:
    """The night folder `ref` names in RUNS/nights (the whole id, a unique prefix, `latest`,
    `@-N`: runfolder.refs.resolve_name); real folders only, links never followed. NoMatch or
    InvalidInput (exit 2) otherwise."""
    nights = Path(runs_dir) / NIGHTS
    try:
        found = refs.entries(nights, night_parts) if os.path.isdir(nights) else {}
    except OSError as e:
        raise InvalidInput(f"cannot read {nights}: {e.strerror or e}") from None
    names = [n for n, what in found.items() if what == refs.FOLDER]
    return nights / refs.resolve_name(ref, names, where, night_parts, "night",
                                      "harness ls --nights")


def campaign_of_night_name(name: str) -> str | None:
    parsed = parse_night_name(name)
    return parsed[0] if parsed else None


def night_folders(nights_dir: Path, campaign: str) -> list[Path]:
    """The campaign's night folders under `nights_dir`, oldest first (UTC stamps sort)."""
    if not nights_dir.is_dir():
        return []
    found = [p for p in nights_dir.iterdir()
             if p.is_dir() and campaign_of_night_name(p.name) == campaign]
    return sorted(found, key=lambda p: p.name)


def latest_night(nights_dir: Path) -> Path | None:
    """The newest night folder of any campaign (by the UTC stamp its name ends with)."""
    if not nights_dir.is_dir():
        return None
    found = [(parsed[1], p) for p in nights_dir.iterdir()
             if p.is_dir() and (parsed := parse_night_name(p.name))]
    return max(found)[1] if found else None

"""The night folder's names: `RUNS/nights/<campaign>-<UTC stamp>/` and the files in it.

One owner, so a change of form cannot leave a reader looking for the old one."""

from __future__ import annotations

import os
import re
import stat
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


def night_names(nights_dir: Path, limit: int = refs.MAX_NAMES) -> list[str]:
    """The night folders directly in `nights_dir` (RUNS/nights), by name: real folders named
    in the safe alphabet (`night_parts`), links never followed, at most `limit`; [] when
    there is no such folder, OSError when it cannot be read. Every reader that finds nights
    by listing comes here, so a symlinked night never leads out of the runs folder."""
    if not os.path.isdir(nights_dir):
        return []
    found = refs.entries(Path(nights_dir), night_parts, limit)
    return [n for n, what in found.items() if what == refs.FOLDER]


def find_night(ref: str, runs_dir: Path, where: str) -> Path:
    """The night folder `ref` names in RUNS/nights (the whole id, a unique prefix, `latest`,
    `@-N`: runfolder.refs.resolve_name); real folders only, links never followed. NoMatch or
    InvalidInput (exit 2) otherwise."""
    nights = Path(runs_dir) / NIGHTS
    try:
        names = night_names(nights)
    except OSError as e:
        raise InvalidInput(f"cannot read {nights}: {e.strerror or e}") from None
    return nights / refs.resolve_name(ref, names, where, night_parts, "night",
                                      "harness ls --nights")


def run_beside(night_dir: Path, recorded: str) -> Path | None:
    """The run folder a night's journal or summary names by `recorded` (its path as
    written), found by its last part only, as RUNS/<name> beside RUNS/nights: a name in the
    safe alphabet, a real folder, never a link. None otherwise. The written path is hostile
    (a copied night's, or `../../etc`), so it is never opened as written."""
    name = os.path.basename(os.path.normpath(recorded)) if isinstance(recorded, str) else ""
    if not is_name(name, RUN_ID_MAX):
        return None
    found = Path(os.path.abspath(night_dir)).parent.parent / name
    try:
        return found if stat.S_ISDIR(os.lstat(found).st_mode) else None
    except (OSError, ValueError):
        return None


def campaign_of_night_name(name: str) -> str | None:
    parsed = parse_night_name(name)
    return parsed[0] if parsed else None


def night_folders(nights_dir: Path, campaign: str) -> list[Path]:
    """The campaign's night folders under `nights_dir` (`night_names`), oldest first (UTC
    stamps sort)."""
    return sorted(Path(nights_dir) / n for n in night_names(nights_dir)
                  if campaign_of_night_name(n) == campaign)


def latest_night(nights_dir: Path) -> Path | None:
    """The newest night folder of any campaign (`night_names`; by the UTC stamp its name
    ends with)."""
    names = refs.newest_first(night_names(nights_dir), night_parts)
    return Path(nights_dir) / names[0] if names else None

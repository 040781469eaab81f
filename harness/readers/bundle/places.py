"""Where each bundled folder sits under a bag's `data/`, so its relative links still work.

A night goes to `data/nights/<night>/` and each run to `data/<run-id>/`, as in RUNS, so
summary.html's `../../<run-id>/` links resolve inside the bag. Older bags keep a night at
`data/<night>/` and are read the same way, so they still verify and merge. Pure."""

from __future__ import annotations

PAYLOAD = "data"
NIGHTS = "nights"  # data/nights/<night>/, as RUNS/nights/<night>/


def arc_folder(name: str, night: bool) -> str:
    """The folder under data/ for a bundled folder named `name`: nights go to nights/."""
    return f"{NIGHTS}/{name}" if night else name


def bundled_folder(path: str) -> str | None:
    """The bundled folder (`data/<name>` or `data/nights/<name>`) a payload path lies in, or None
    for a path directly in data/ or data/nights/ (not in any bundled folder)."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != PAYLOAD:
        return None
    if parts[1] != NIGHTS:
        return "/".join(parts[:2])
    return "/".join(parts[:3]) if len(parts) >= 4 else None


def folder_name(folder: str) -> str:
    """The bundled folder's own name (`data/nights/n` -> `n`; `nights/n` -> `n`)."""
    return folder.rsplit("/", 1)[-1]


def is_night_folder(folder: str) -> bool:
    """Whether a bundled folder (`data/...` or relative to data/) is in the nights place."""
    return folder.removeprefix(f"{PAYLOAD}/").startswith(f"{NIGHTS}/")

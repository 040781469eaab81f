"""The bytes a run's controls mount are part of what runs, so they are part of the source
seal and of what an approval covers. A read-only environment mount (a venv) may say
`sealed: false`, which `require_approval` refuses; read-write mounts are scratch, models
have their own pins. Bytecode caches are left out: the host writes them on import.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.config.schema import Control

MAX_SEALED_FILES = 5000  # per mount: more is an environment, to be marked `sealed: false`


class TooManyFiles(ValueError):
    """A sealed mount holds more files than a workload's code would."""


def _bytecode(name: str) -> bool:
    return name.endswith(".pyc")


Allowed = Callable[[Path], bool]  # may this real path be mounted (roots, system paths)?


def _regular(path: Path) -> bool:
    """A regular file, or a link to one: never a FIFO, socket or device, which hashing
    could block on or read from."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def mounted_files(source: Path, allowed: Allowed, limit: int = MAX_SEALED_FILES
                  ) -> list[Path]:
    """Every regular file under a mount source as the container sees it (its real path,
    linked folders not followed, bytecode left out), sorted; TooManyFiles past `limit`.
    [] when absent or now leading where no mount may go: the launch refuses it, unread."""
    real = Path(os.path.realpath(source))
    if not allowed(real):
        return []
    if _regular(real):
        return [real]
    out: list[Path] = []
    for root, dirs, files in os.walk(real):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [Path(root, f) for f in sorted(files)
                if not _bytecode(f) and _regular(Path(root, f))]
        if len(out) > limit:
            raise TooManyFiles(f"{source} holds over {limit} files: if it is an environment, "
                               "not the workload, mark the mount `sealed: false`")
    return out


Resolve = Callable[[str, Path], Path]  # a mount source as written, the control's folder


def mount_inputs(controls: Iterable[tuple[Control, Path]], resolve: Resolve,
                 allowed: Allowed) -> list[Path]:
    """Every file of each sealed read-only mount of these (control, control file) pairs."""
    return [p for ctl, ctl_path in controls for m in ctl.mounts if m.read_only and m.sealed
            for p in mounted_files(resolve(m.source, ctl_path.parent), allowed)]


def mount_problems(ctl: Control, ctl_path: Path, resolve: Resolve, allowed: Allowed
                   ) -> list[tuple[int, str]]:
    """(mount index, why) for each sealed mount that cannot be walked as a workload's files."""
    out = []
    for i, m in enumerate(ctl.mounts):
        try:
            if m.read_only and m.sealed:
                mounted_files(resolve(m.source, ctl_path.parent), allowed)
        except (TooManyFiles, OSError) as e:
            out.append((i, str(e)))
    return out

"""What defines a run, beyond the campaign's own files: the bytes its controls mount.

A control's workload code often arrives by a read-only mount (a scenario script, a test-only
plug-in), not in the image. Those bytes are part of what runs, so they are part of the
source seal (`Loaded.files`), and therefore of what an approval covers: one definition
serves the seal, the approval and the provenance check. A read-only mount that is an
environment rather than the workload (a venv of many thousand files, pinned elsewhere) says
`sealed: false`; a campaign with `require_approval` refuses such a mount, because no
approval covers its bytes. Read-write mounts are the run's scratch, never inputs. Models
have their own per-file pins and are not walked here.

Python's bytecode caches (`__pycache__`, `*.pyc`) are left out: the host writes them when it
imports the same folder, and the container's Python checks them against their sources.
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
    """Every regular file under a mount source (the source itself when it is one), as the
    container sees it: the source's real path, walked without following linked folders,
    bytecode caches left out; sorted. TooManyFiles past `limit`; [] when it is absent or
    now resolves where no mount may go (`allowed`: outside the mount roots, a system path):
    the launch refuses either with its own rule, and nothing there is ever read, not even
    to be hashed."""
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

"""An addendum to a sealed run folder: it appears whole or not at all, one at a time.

Sealed evidence is never rewritten: a later judgement goes into a new folder
`addenda/<UTCstamp>-<name>/` with its own SHA256SUMS, beside the sealed files.

An addendum appears whole or not at all, and two writers cannot interleave:
- everything happens under an exclusive flock on the run folder's own descriptor
  (`addendum_lock`, harness.base.flock: nothing is created to lock it);
- the addendum is written and sealed in a temporary folder beside the run folder
  (`.<run>.addendum-<random>`, same file system, outside the verified tree), then renamed
  into `addenda/` (or renamed into place as `addenda/` itself when it is the first one);
- the write bit is lent only under the lock, and the run folder and everything under
  `addenda/` are always set back to the fixed sealed modes (folders 0555, files 0444),
  never to modes remembered from before, so a killed or concurrent writer cannot leave
  the folder writable past the next one.
A writer killed before the rename leaves only its temporary folder, which the next one
(holding the lock) removes.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from harness.base import faultpoint, flock
from harness.base.atomic import fsync_dir, write_bytes
from harness.base.errors import EnvironmentFault, InvalidInput
from harness.base.timeutil import stamp
from harness.base.tree import chmod_beneath, kind_of, remove_beneath
from harness.measure.runfolder.layout import ADDENDA, SUMS
from harness.measure.runfolder.manifest import DIR_MODE, make_read_only, write_manifest

LOCK_TIMEOUT = 120.0  # seconds to wait for another refinalize of the same run


@contextlib.contextmanager
def addendum_lock(run_dir: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the exclusive flock on the run folder's own descriptor (nothing is created)."""
    try:
        fd = flock.open_folder(run_dir)
    except OSError as e:
        raise InvalidInput(f"{run_dir} is not a run folder ({e.strerror})") from None
    with flock.holding(fd, timeout=timeout, busy=f"{run_dir}: another refinalize has held "
                       f"the run for over {timeout:g}s"):
        yield


def _temp_pattern(run_dir: Path) -> re.Pattern[str]:
    return re.compile(re.escape(f".{run_dir.name}.addendum-") + "[0-9a-f]{16}")


def _remove_stale_temps(run_dir: Path) -> None:
    """Temporary folders of refinalizes killed before their rename (we hold the lock, so
    no live one exists)."""
    pattern = _temp_pattern(run_dir)
    with os.scandir(run_dir.parent) as it:
        stale = [e.name for e in it if pattern.fullmatch(e.name)]
    for name in stale:
        remove_beneath(run_dir.parent, name)


def _free_name(addenda: Path, base: str) -> str:
    for n in range(100):
        name = base if n == 0 else f"{base}-{n}"
        if not os.path.lexists(addenda / name):  # under the lock: nobody else adds one
            return name
    raise EnvironmentFault(f"{addenda}: could not create a new addendum folder for {base}")


def _restore_modes(run_dir: Path, sealed: bool) -> None:
    """The fixed sealed modes, whatever they were: never a remembered mode."""
    addenda = run_dir / ADDENDA
    if os.path.isdir(addenda) and not os.path.islink(addenda):
        make_read_only(addenda)
    if sealed:
        chmod_beneath(run_dir, "", DIR_MODE)


def _write_locked(run_dir: Path, name: str, files: dict[str, bytes], now: datetime) -> Path:
    addenda = run_dir / ADDENDA
    try:
        st = os.lstat(addenda)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise EnvironmentFault(f"cannot write the addendum under {addenda}: it is a "
                               f"{kind_of(st.st_mode)}, not a real folder")
    sealed = os.path.lexists(run_dir / SUMS)
    base = f"{stamp(now)}-{name}"
    _remove_stale_temps(run_dir)
    tmp = run_dir.parent / f".{run_dir.name}.addendum-{os.urandom(8).hex()}"
    os.mkdir(tmp, 0o700)
    try:
        inner = tmp / base
        inner.mkdir(0o700)
        for filename, data in sorted(files.items()):
            write_bytes(inner / filename, data)  # a new folder: nothing to collide with
        write_manifest(inner)  # the addendum's own SHA256SUMS, the same as a run's
        faultpoint.reach("addendum-sealed")
        try:
            if st is None:  # the first addendum: `addenda/` appears whole, with it inside
                if sealed:  # the write bit, lent only under the lock
                    chmod_beneath(run_dir, "", 0o755)
                os.rename(tmp, addenda)
                folder = addenda / base
            else:
                chmod_beneath(run_dir, ADDENDA, 0o755)
                folder = addenda / _free_name(addenda, base)
                os.rename(inner, folder)
            fsync_dir(folder.parent)
            fsync_dir(run_dir)
        finally:
            _restore_modes(run_dir, sealed)
    finally:
        if os.path.lexists(tmp):
            remove_beneath(run_dir.parent, tmp.name)
    return folder


def write_addendum(run_dir: Path, name: str, files: dict[str, bytes], now: datetime) -> Path:
    """Create `addenda/<stamp>-<name>/` holding `files` and their SHA256SUMS, all read-only,
    atomically and under the run's lock."""
    run_dir = Path(run_dir)
    with addendum_lock(run_dir):
        return write_under_lock(run_dir, name, files, now)


def write_under_lock(run_dir: Path, name: str, files: dict[str, bytes], now: datetime) -> Path:
    """`write_addendum` for a caller that holds `addendum_lock` already."""
    try:
        return _write_locked(run_dir, name, files, now)
    except OSError as e:
        raise EnvironmentFault(f"cannot write the addendum under {run_dir / ADDENDA}: "
                               f"{e}") from None

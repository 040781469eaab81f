"""Gate 0 over a run folder: read its observations, judge, and (refinalize) add an addendum.

Sealed evidence is never rewritten: a later judgement goes into a new folder
`addenda/<UTCstamp>-<name>/` with its own SHA256SUMS. Refinalize judges only what a seal
vouches for: a folder that was never sealed (`REFINALIZE-UNSEALED`) or fails `verify`
(`REFINALIZE-NOT-INTACT`) is refused before anything is read or written.

An addendum appears whole or not at all, and two refinalizes cannot interleave:
- everything happens under an exclusive flock on the run folder's own descriptor;
- the addendum is written and sealed in a temporary folder beside the run folder
  (`.<run>.addendum-<random>`, same file system, outside the verified tree), then renamed
  into `addenda/` (or renamed into place as `addenda/` itself when it is the first one);
- the write bit is lent only under the lock, and the run folder and everything under
  `addenda/` are always set back to the fixed sealed modes (folders 0555, files 0444),
  never to modes remembered from before, so a killed or concurrent refinalize cannot
  leave the folder writable past the next one.
A refinalize killed before the rename leaves only its temporary folder, which the next
one (holding the lock) removes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.base import faultpoint
from harness.base.atomic import dumps_json, fsync_dir, write_bytes
from harness.base.catalogue import (
    ENV_LOCK_TIMEOUT,
    REFINALIZE_NOT_INTACT,
    REFINALIZE_UNSEALED,
)
from harness.base.errors import EnvironmentFault, InvalidInput
from harness.base.timeutil import iso, stamp
from harness.base.tree import chmod_beneath, kind_of, remove_beneath
from harness.judge.finalize.contract import rejudge_contract
from harness.judge.finalize.observed import (
    SealedReader,
    judge_run,
)
from harness.measure.runfolder.layout import (
    ADDENDA,
    POST_STEPS,
    RECORD,
    SUMS,
    VERDICT,
    post_step_file,
)
from harness.measure.runfolder.manifest import DIR_MODE, make_read_only, write_manifest
from harness.measure.runfolder.sealed import require_sealed

LOCK_TIMEOUT = 120.0  # seconds to wait for another refinalize of the same run
RULE_UNSEALED = REFINALIZE_UNSEALED
RULE_NOT_INTACT = REFINALIZE_NOT_INTACT


@contextlib.contextmanager
def addendum_lock(run_dir: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the exclusive flock on the run folder's own descriptor (nothing is created)."""
    try:
        fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise InvalidInput(f"{run_dir} is not a run folder ({e.strerror})") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EnvironmentFault(
                        f"{run_dir}: another refinalize has held the run for over "
                        f"{timeout:g}s", rule=ENV_LOCK_TIMEOUT) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the flock


def require_intact(run_dir: Path) -> None:
    """Refuse a folder no seal vouches for: never sealed, or failing `verify` (the one
    verified reader's check, with refinalize's own rules)."""
    require_sealed(run_dir, (RULE_UNSEALED, "refinalize judges only sealed runs"),
                   (RULE_NOT_INTACT, "refinalize judges only intact runs, nothing was written"))


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
        return _write(run_dir, name, files, now)


def _write(run_dir: Path, name: str, files: dict[str, bytes], now: datetime) -> Path:
    try:
        return _write_locked(run_dir, name, files, now)
    except OSError as e:
        raise EnvironmentFault(f"cannot write the addendum under {run_dir / ADDENDA}: "
                               f"{e}") from None


def refinalize(run_dir: Path, now: datetime, contract: list[str] | str | None = None,
               pins: dict[str, Any] | None = None) -> tuple[dict[str, Any], Path]:
    """Re-judge a sealed, intact run into a new addendum. The run's own status stands.
    `contract`: a list or `all`; None: as its gate0 verdict was judged (rejudge_contract)."""
    run_dir = Path(os.path.realpath(run_dir))  # the operator's path; nothing inside
    if not run_dir.is_dir():
        raise InvalidInput(f"{run_dir} is not a run folder with a readable {RECORD}")
    with addendum_lock(run_dir):
        require_intact(run_dir)  # under the lock: what is judged is what was verified
        sealed = SealedReader(run_dir)  # ...and read only as the bytes the seal vouches for
        run = sealed.record()
        if run is None:
            raise InvalidInput(f"{run_dir} is not a run folder with a readable {RECORD}")
        previous = sealed.json(post_step_file("gate0", VERDICT))
        verdict = judge_run(run_dir, rejudge_contract(contract, previous), pins, sealed)
        record = {**verdict, "refinalize": {
            "run_id": run.run_id, "time": iso(now),
            "original_status": run.status,
            "original_gate0": None if previous is None else previous.get("verdict"),
            "note": "a new judgement beside the old; the run's recorded status stands",
        }}
        folder = _write(run_dir, "refinalize",
                        {VERDICT: dumps_json(record).encode()}, now)
    return record, folder


def read_run_verdict(run_dir: Path) -> dict[str, Any] | None:
    """The gate0 post-step's original verdict, if the run has one."""
    try:
        verdict = json.loads((run_dir / POST_STEPS / "gate0" / VERDICT).read_bytes())
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) else None


def standing(record: dict[str, Any]) -> int:
    """Exit code of a refinalize: 0 only when the run was accepted and still is."""
    accepted = record["refinalize"]["original_status"] == "accepted"
    return 0 if accepted and record["verdict"] == "accepted" else 1


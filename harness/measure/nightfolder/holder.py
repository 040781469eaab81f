"""Who holds the night lock, read back, and whether a night runs.

Taking the lock is the driver's; the record is hostile, cleaned by `lock.read_holder`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.base.errors import HarnessError
from harness.base.gpuslot import GpuSlot
from harness.base.readfile import read_bounded
from harness.base.states import State
from harness.measure.lock import clean_text, describe_holder, pid_alive, read_holder
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME, run_beside
from harness.measure.nightfolder.rows import Row
from harness.measure.runfolder.layout import OWNER


def night_lock_path(gpu_lock: Path) -> Path:
    return GpuSlot(Path(gpu_lock)).night_lock


def read_night_holder(gpu_lock: Path) -> dict | None:
    """Who holds the night lock (with `alive`), or None."""
    return read_holder(night_lock_path(gpu_lock))


def launcher_alive(run_dir: Path, host: str) -> bool:
    """Whether a run folder's harness.json names a process of `host` still the one that
    started then (a reused pid is not it); another host's cannot be judged from here."""
    try:
        owner = json.loads(read_bounded(Path(run_dir) / OWNER, 64 * 1024, "run file"))
        return (isinstance(owner, dict) and owner.get("host") == host
                and pid_alive(int(owner["pid"]), float(owner["create_time"])))
    except (ValueError, TypeError, KeyError, RecursionError, OverflowError):  # InputError too
        return False


def is_running(night_dir: str, holder: dict | None, live_run: bool,
               real: Callable[[str], str] = os.path.realpath) -> bool:
    """Does the night run (`status` and `ls --nights` ask here): a harness still writes one of
    its runs, or the night lock's live holder names its folder, compared resolved by `real`
    (a relative name is of the holder's cwd, unknown here). Pure but for `real`."""
    named = (holder or {}).get("night_dir")
    return live_run or ((holder or {}).get("alive") is True and isinstance(named, str)
                        and os.path.isabs(named) and real(named) == real(night_dir))


def night_running(night_dir: Path, holder: dict | None, host: str,
                  rows: Sequence[Row] | None = None) -> bool:
    """`is_running` with its facts read: the journal's running runs (its `rows`, where the
    caller has them open already), each folder found beside RUNS/nights by its name only
    (`run_beside`: the journal's path is hostile)."""
    if rows is None:
        try:
            with Journal.open(Path(night_dir) / JOURNAL_NAME, readonly=True) as journal:
                rows = journal.rows()
        except HarnessError:  # damaged: `harness status` says why
            rows = []
    dirs = [r.run_dir for r in rows if r.state == State.RUNNING]
    found = [run_beside(night_dir, d) for d in dirs if isinstance(d, str)]
    return is_running(str(night_dir), holder,
                      any(f is not None and launcher_alive(f, host) for f in found))


def describe(holder: dict | None) -> str:
    """One bounded, printable line (fields were cleaned by `read_holder`)."""
    if not holder:
        return "an unknown process (no holder record yet)"
    if "unreadable" in holder:
        return describe_holder(holder)
    state = "" if holder.get("alive") else ", not running any more"
    what = holder.get("kind", "night")
    where = clean_text(holder.get("night_dir") or holder.get("run_dir") or "-")
    return (f"{what} of campaign {holder.get('campaign', '?')} (pid {holder.get('pid', '?')}, "
            f"{holder.get('user', '?')}@{holder.get('host', '?')}, since "
            f"{holder.get('since', '?')}, {where}{state})")

"""The run folders a night folder stands for: its journal's rows, found in its runs folder.

The journal is evidence and may be forged, so a row's path is never opened as written:
the run id must be a plain folder name and the path's last part, and the folder bundled
is RUNS/<run-id>, a real folder beside the nights. A run elsewhere is bundled only when
named too. The journal is read from a private copy, so export never writes into the night
(SQLite readers touch `-shm`/`-wal`)."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.base.errors import HarnessError
from harness.base.readfile import InputError, read_bounded
from harness.base.states import State
from harness.base.tree import path_problem
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME, NIGHTS
from harness.measure.nightfolder.rows import Row

JOURNAL_LIMIT = 256 * 1024 * 1024
# SQLite's side files of the journal. `-shm` is a shared-memory index rebuilt from the WAL
# on every open, whose bytes change when anyone merely reads the journal; an empty `-wal`
# holds nothing and comes and goes with readers. Neither is evidence, and bundling them
# would make two exports of an unchanged night differ.
SHM = f"{JOURNAL_NAME}-shm"
WAL = f"{JOURNAL_NAME}-wal"


@dataclass(frozen=True)
class NightRun:
    run_id: str
    state: str
    recorded: str  # the journal's path for it, for messages only


def left_out(rel: str, size: int) -> bool:
    """True for a night's SQLite side file that is not bundled (see SHM/WAL). Pure."""
    return rel == SHM or (rel == WAL and size == 0)


def journal_runs(rows: list[Row], where: str) -> tuple[list[NightRun], list[str]]:
    """The runs the rows name, and a fault for each row that names one badly. Pure.
    A forged or damaged row (half a name, a mismatched folder, a run named twice) bundles
    nothing of the night."""
    runs: list[NightRun] = []
    faults: list[str] = []
    seen: set[str] = set()
    for row in rows:
        if not row.run_id and not row.run_dir:
            continue
        said = f"{where}: row {row.id} names run {row.run_id!r} in {row.run_dir!r}"
        rid = row.run_id or ""
        if (not rid or not row.run_dir or "/" in rid or rid in (".", "..")
                or path_problem(rid)):
            faults.append(f"{said}: not a run id a night writes")
        elif PurePosixPath(os.path.normpath(row.run_dir)).name != rid:
            faults.append(f"{said}: the folder is not named for its run")
        elif rid in seen:
            faults.append(f"{said}: that run is named by more than one row")
        else:
            seen.add(rid)
            runs.append(NightRun(rid, row.state, row.run_dir))
    return runs, faults


def read_rows(night: Path) -> list[Row]:
    """The journal's rows, read from a private copy (never through a link);
    InputError when it cannot be read."""
    with tempfile.TemporaryDirectory(prefix="harness-bundle-") as tmp:
        try:
            for name in (JOURNAL_NAME, WAL):
                if name == JOURNAL_NAME or os.path.lexists(night / name):
                    (Path(tmp) / name).write_bytes(
                        read_bounded(night / name, JOURNAL_LIMIT, what="night journal"))
            with Journal.open(Path(tmp) / JOURNAL_NAME, readonly=True) as journal:
                return journal.rows()
        except InputError as e:
            raise InputError(e.message) from None
        except HarnessError as e:
            raise InputError(f"{night / JOURNAL_NAME}: {e.message}") from None


def _folder(runs_dir: Path | None, run: NightRun, night: Path) -> tuple[Path | None, str | None]:
    """(folder, None) to bundle, (None, None) when the run never got a folder, or (None, fault)."""
    hint = "give its folder as well to bundle it"
    if runs_dir is None:
        return None, (f"{night}: run {run.run_id} is not beside the night (the night folder "
                      f"is not in a RUNS/{NIGHTS}/ folder); {hint}")
    path = runs_dir / run.run_id
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if run.state in (State.INTERRUPTED, State.PLANNED, State.DEFERRED):
            return None, None  # cut off before its folder was made: the journal says so
        return None, (f"{path}: run {run.run_id} of night {night.name} ({run.state}) is not "
                      f"there (the journal says {run.recorded!r}); {hint}")
    except OSError as e:
        return None, f"{path}: cannot read: {e.strerror or e}"
    real = os.path.realpath(path)
    if not stat.S_ISDIR(mode) or real != os.path.join(os.path.realpath(runs_dir), run.run_id):
        return None, (f"{path}: run {run.run_id} of night {night.name} is not a real folder "
                      "(a symlink or a file); bundles hold run folders as they are")
    return Path(real), None


def night_run_folders(night: Path, given: set[str]) -> tuple[list[Path], list[str]]:
    """The run folders to bundle with the night folder `night` (real path), leaving out the
    runs whose folder names are in `given` (the operator named them), and the faults."""
    try:
        rows = read_rows(night)
    except InputError as e:
        return [], [f"{e.message}; a night is bundled with the runs its journal names"]
    runs, faults = journal_runs(rows, str(night / JOURNAL_NAME))
    if faults:
        return [], faults
    runs_dir = night.parent.parent if night.parent.name == NIGHTS else None  # RUNS/nights/<n>
    folders: list[Path] = []
    for run in runs:
        if run.run_id in given:
            continue
        folder, fault = _folder(runs_dir, run, night)
        if fault:
            faults.append(fault)
        elif folder is not None:
            folders.append(folder)
    return folders, faults

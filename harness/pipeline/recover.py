"""Recovery after a SIGKILL: seal, as `interrupted`, any run folder its harness left open.

A folder without SHA256SUMS whose writer (`harness.json`: pid, start time, host) is gone
was cut off: it is cleaned (`pipeline.clean`, whose reasons join the record) and sealed as
it is. Nothing existing is rewritten: `recovered.json` says a seal was cut short. A runs
folder is hostile input: everything is read bounded, never through a symlink or FIFO, and
one bad folder never stops the others."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import psutil

from harness import __version__
from harness.base.atomic import write_json
from harness.base.catalogue import RUN_INTERRUPTED
from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_bounded
from harness.base.reason import Reason, rules
from harness.base.states import Status
from harness.base.timeutil import utc_now
from harness.measure.lock import pid_alive
from harness.measure.runfolder import layout, runjson
from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import make_read_only, write_manifest
from harness.measure.runfolder.runjson import RunRecord
from harness.pipeline.clean import clean

RECORD_LIMIT = 1024 * 1024  # our own records are a few kB; anything bigger is not ours


def write_owner(run_dir: Path, **about: object) -> None:
    """Record this process as the folder's writer, with what it is running (`about`)."""
    me = psutil.Process()
    write_json(run_dir / layout.OWNER, {
        "schema": "harness.owner/v1", "pid": me.pid, "create_time": me.create_time(),
        "host": socket.gethostname(), "argv": sys.argv, "harness_version": __version__,
        "python": sys.version.split()[0], "created": utc_now(), **about,
    }, exclusive=True)


def _read(path: Path) -> dict:
    """A JSON object record, or {} for anything else: absent, a FIFO, a symlink, huge, odd."""
    try:
        doc = json.loads(read_bounded(path, RECORD_LIMIT, "record"))
    except (InputError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def owner_alive(owner: dict) -> bool:
    """Is the recorded writer still this host's same process?"""
    if owner.get("host") != socket.gethostname():
        return True  # another host's folder: never judge it from here
    try:
        return pid_alive(int(owner["pid"]), float(owner["create_time"]))
    except (KeyError, ValueError, TypeError, OverflowError):
        return False


def is_orphaned(run_dir: Path) -> bool:
    if not is_real_dir(run_dir) or os.path.lexists(run_dir / SUMS):
        return False
    owner = _read(run_dir / layout.OWNER)
    return bool(owner) and not owner_alive(owner)


def interrupted_record(run_dir: Path, reasons: list[Reason]) -> RunRecord:
    """run.json for a cut-off run, from what its folder holds."""
    found = tuple(Reason.of(r) for r in reasons)
    owner, pre = _read(run_dir / layout.OWNER), _read(run_dir / layout.PREFLIGHT)
    return RunRecord(
        run_id=owner.get("run_id", run_dir.name), attempt=owner.get("attempt"),
        campaign=owner.get("campaign"), control=owner.get("control"),
        image=pre.get("image") or {"name": None, "id": None},
        seal=(pre.get("source_seal") or {}).get("seal"),
        model_hashes=pre.get("model_hashes") or {}, status=Status.INTERRUPTED,
        reasons=found, rules=sorted({RUN_INTERRUPTED, *rules(found)}),
        times={"created": owner.get("created"), "started": None, "ended": None,
               "sealed": utc_now()},
        lock=None, outcome={"exit_code": None, "oom_killed": None, "timed_out": None,
                            "interrupted": True, "duration_s": None},
        post_steps=[], rerun_of=owner.get("rerun_of"),
        recovered={"at": utc_now(), "by_pid": os.getpid()})


def _sealed_reasons(run_dir: Path) -> tuple[str, list[Reason] | None]:
    """(status word, reasons or None) of a folder sealed already."""
    rec = _read(run_dir / layout.RECOVERED)
    if rec:
        got = rec.get("reasons")
        return (str(rec.get("status") or Status.INTERRUPTED),
                [Reason.of(r) for r in got] if isinstance(got, list) else None)
    try:
        run = runjson.read(run_dir)
    except InvalidInput:
        return Status.INTERRUPTED, None
    listed = isinstance(run.raw.get("reasons"), list)
    return run.status or Status.INTERRUPTED, list(run.reasons) if listed else None


def seal_interrupted(run_dir: Path, why: str, notes: tuple[str, ...] = ()
                     ) -> tuple[str, list[Reason]]:
    """Clean and seal a cut-off folder as it is; (status, reasons). Idempotent."""
    reasons = [Reason(RUN_INTERRUPTED, why), *(Reason(RUN_INTERRUPTED, n) for n in notes)]
    if not is_real_dir(run_dir):
        return Status.INTERRUPTED, [*reasons, Reason(RUN_INTERRUPTED, "the run folder is not "
                                                     "a real folder (absent or a symlink); "
                                                     "nothing was sealed")]
    if os.path.lexists(run_dir / SUMS):  # sealed already (by its harness or an earlier pass)
        status, got = _sealed_reasons(run_dir)
        return status, reasons if got is None else got
    reasons += clean(run_dir)
    if os.path.lexists(run_dir / layout.RECORD):
        cut = Reason(RUN_INTERRUPTED, f"{layout.RECORD} was written, the seal was not")
        write_json(run_dir / layout.RECOVERED, {
            "schema": "harness.recovered/v1", "status": Status.INTERRUPTED,
            "reasons": [r.text() for r in (*reasons, cut)],
            "rules": sorted({RUN_INTERRUPTED, *rules(reasons)}),
            "recovered_by": {"pid": os.getpid(), "at": utc_now()},
        }, exclusive=True)
    else:
        runjson.write(run_dir, interrupted_record(run_dir, reasons))
    write_manifest(run_dir)
    make_read_only(run_dir)
    return Status.INTERRUPTED, reasons


def _say(run_dir: Path, error: str) -> None:
    print(f"harness: could not seal the cut-off run folder {run_dir}: {error}; it is left "
          "as it is and tried again by the next run", file=sys.stderr)


def seal_orphans(runs_dir: Path,
                 on_error: Callable[[Path, str], None] = _say,
                 still_running: Callable[[str], bool] | None = None,
                 on_deferred: Callable[[Path], None] | None = None) -> list[Path]:
    """Seal every orphaned run folder directly under `runs_dir`; return those sealed. One
    that cannot be sealed goes to `on_error`; one whose container still runs to
    `on_deferred` (a seal is only made once nothing can change what it covers)."""
    sealed: list[Path] = []
    try:
        with os.scandir(runs_dir) as it:
            names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return sealed  # no runs folder yet (or not a folder): nothing to recover
    for name in names:
        d = Path(runs_dir) / name
        try:
            if not is_orphaned(d):
                continue
            if still_running is not None and still_running(name):
                if on_deferred is not None:
                    on_deferred(d)
                continue
            seal_interrupted(d, "the harness that ran it died before sealing "
                                "(sealed as found by a later harness)")
        except (OSError, ValueError) as e:
            on_error(d, f"{type(e).__name__}: {e}")
            continue
        sealed.append(d)
    return sealed

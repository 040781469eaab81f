"""Recovery after a SIGKILL: seal, as `interrupted`, any run folder its harness left open.

A run folder records who is writing it (`harness.json`: pid, process start time, host).
A folder without SHA256SUMS whose writer is gone was cut off; it is sealed exactly as it
is, adding only a run.json (if it had none) that says so. Nothing existing is rewritten.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import psutil

from harness import __version__
from harness.atomic import write_json
from harness.seal import SUMS, make_read_only, write_manifest
from harness.timeutil import utc_now

OWNER = "harness.json"


def write_owner(run_dir: Path) -> None:
    me = psutil.Process()
    write_json(run_dir / OWNER, {
        "schema": "harness.owner/v1", "pid": me.pid, "create_time": me.create_time(),
        "host": socket.gethostname(), "argv": sys.argv, "harness_version": __version__,
        "python": sys.version.split()[0], "created": utc_now(),
    }, exclusive=True)


def owner_alive(owner: dict) -> bool:
    """Pure-ish: is the recorded writer still this host's same process?"""
    if owner.get("host") != socket.gethostname():
        return True  # another host's folder: never judge it from here
    try:
        p = psutil.Process(int(owner["pid"]))
        return abs(p.create_time() - float(owner["create_time"])) < 0.01
    except (psutil.Error, KeyError, ValueError, TypeError):
        return False


def is_orphaned(run_dir: Path) -> bool:
    if (run_dir / SUMS).exists():
        return False
    try:
        owner = json.loads((run_dir / OWNER).read_text())
    except (OSError, ValueError):
        # No owner record: only folders old enough that no live writer could be behind them.
        return False
    return not owner_alive(owner)


RECOVERED = "recovered.json"


def seal_interrupted(run_dir: Path, why: str) -> None:
    """Seal a cut-off folder as it is: add run.json if it has none, else recovered.json
    (its run.json was written but the seal was cut short), then SHA256SUMS."""
    if (run_dir / "run.json").exists():
        write_json(run_dir / RECOVERED, {
            "schema": "harness.recovered/v1", "status": "interrupted",
            "reason": f"RUN-INTERRUPTED: {why}; run.json was written, the seal was not",
            "recovered_by": {"pid": os.getpid(), "at": utc_now()},
        }, exclusive=True)
    else:
        write_json(run_dir / "run.json", {
            "schema": "harness.run/v1", "run_id": run_dir.name, "status": "interrupted",
            "reasons": [f"RUN-INTERRUPTED: {why}"], "rules": ["RUN-INTERRUPTED"],
            "times": {"sealed": utc_now()}, "recovered_by": {"pid": os.getpid(),
                                                              "at": utc_now()},
        }, exclusive=True)
    write_manifest(run_dir)
    make_read_only(run_dir)


def seal_orphans(runs_dir: Path) -> list[Path]:
    """Seal every orphaned run folder directly under `runs_dir`; return those sealed."""
    sealed = []
    if not runs_dir.is_dir():
        return sealed
    for d in sorted(runs_dir.iterdir()):
        if d.is_dir() and not d.is_symlink() and is_orphaned(d):
            seal_interrupted(d, "the harness that ran it died before sealing "
                                "(sealed as found by a later harness)")
            sealed.append(d)
    return sealed

"""Recovery after a SIGKILL: seal, as `interrupted`, any run folder its harness left open.

Each run folder records who writes it (`harness.json`: pid, process start time, host, and
which campaign and control it runs). A folder without SHA256SUMS whose writer is gone was
cut off; it is sealed exactly as it is. Nothing existing is rewritten: a run.json is added
only if there was none, and when there was one (the harness died while sealing),
`recovered.json` says the seal was cut short.
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
RECOVERED = "recovered.json"


def write_owner(run_dir: Path, **about: object) -> None:
    """Record this process as the folder's writer, with what it is running (`about`)."""
    me = psutil.Process()
    write_json(run_dir / OWNER, {
        "schema": "harness.owner/v1", "pid": me.pid, "create_time": me.create_time(),
        "host": socket.gethostname(), "argv": sys.argv, "harness_version": __version__,
        "python": sys.version.split()[0], "created": utc_now(), **about,
    }, exclusive=True)


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def owner_alive(owner: dict) -> bool:
    """Is the recorded writer still this host's same process?"""
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
    owner = _read(run_dir / OWNER)
    return bool(owner) and not owner_alive(owner)


def interrupted_record(run_dir: Path, reasons: list[str]) -> dict:
    """run.json for a cut-off run, from what its folder holds."""
    owner, pre = _read(run_dir / OWNER), _read(run_dir / "preflight.json")
    return {
        "schema": "harness.run/v1",
        "run_id": owner.get("run_id", run_dir.name),
        "attempt": owner.get("attempt"),
        "campaign": owner.get("campaign"),
        "control": owner.get("control"),
        "image": pre.get("image") or {"name": None, "id": None},
        "seal": (pre.get("source_seal") or {}).get("seal"),
        "model_hashes": pre.get("model_hashes") or {},
        "status": "interrupted",
        "reasons": reasons,
        "rules": ["RUN-INTERRUPTED"],
        "times": {"created": owner.get("created"), "started": None, "ended": None,
                  "sealed": utc_now()},
        "lock": None,
        "outcome": {"exit_code": None, "oom_killed": None, "timed_out": None,
                    "interrupted": True, "duration_s": None},
        "post_steps": [],
        "rerun_of": owner.get("rerun_of"),
        "recovered": {"at": utc_now(), "by_pid": os.getpid()},
    }


def seal_interrupted(run_dir: Path, why: str, notes: tuple[str, ...] = ()) -> tuple[str, list]:
    """Seal a cut-off folder as it is; return (status, reasons). Idempotent."""
    reasons = [f"RUN-INTERRUPTED: {why}", *(f"RUN-INTERRUPTED: {n}" for n in notes)]
    if (run_dir / SUMS).exists():  # sealed already (by its own harness or an earlier pass)
        rec = _read(run_dir / RECOVERED) or _read(run_dir / "run.json")
        return str(rec.get("status") or "interrupted"), list(rec.get("reasons") or reasons)
    if (run_dir / "run.json").exists():
        write_json(run_dir / RECOVERED, {
            "schema": "harness.recovered/v1", "status": "interrupted",
            "reasons": [*reasons, "RUN-INTERRUPTED: run.json was written, the seal was not"],
            "recovered_by": {"pid": os.getpid(), "at": utc_now()},
        }, exclusive=True)
    else:
        write_json(run_dir / "run.json", interrupted_record(run_dir, reasons), exclusive=True)
    write_manifest(run_dir)
    make_read_only(run_dir)
    return "interrupted", reasons


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

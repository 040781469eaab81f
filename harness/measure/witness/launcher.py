"""Witness of the launcher: the `docker run` process, taken once it runs the docker CLI.

The kernel sets a new program's arguments a moment after `Popen` returns (under load the
witness saw an empty or the harness's own argv), so it waits, bounded, until they are the
launcher's, and says whether it saw that (`exec.confirmed`) and how long it waited.
Comparing with the recorded vector is a judge's (`judge.witnessed`).
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _proc(p: psutil.Process) -> dict:
    with p.oneshot():
        info: dict = {"pid": p.pid, "create_time": p.create_time()}
        for key, getter in (("argv", p.cmdline), ("exe", p.exe), ("name", p.name),
                            ("cwd", p.cwd), ("status", p.status)):
            try:
                info[key] = getter()
            except (psutil.AccessDenied, psutil.ZombieProcess, FileNotFoundError):
                info[key] = None
        try:
            info["uids"], info["gids"] = ({"real": i.real, "effective": i.effective,
                                           "saved": i.saved} for i in (p.uids(), p.gids()))
        except (psutil.AccessDenied, psutil.ZombieProcess):
            info["uids"] = info["gids"] = None
    return info


EXEC_WAIT_S = 5.0  # how long the witness waits for the exec to show
_POLL_S = (0.0005, 0.02)  # first and longest pause between two looks


def _exec(p: psutil.Process, program: str, limit: float) -> dict:
    """Wait until `p` has exec'd: its argv is readable and is no longer the one it
    inherited from this process at fork. What was seen and for how long; NoSuchProcess
    passes through (the launcher exited: nothing to witness)."""
    own = psutil.Process().cmdline()
    t0, pause, looks = time.monotonic(), _POLL_S[0], 0
    while True:
        looks += 1
        try:
            argv = p.cmdline()
        except psutil.ZombieProcess:
            raise psutil.NoSuchProcess(p.pid) from None  # it exited: it will exec nothing
        except psutil.AccessDenied:
            argv = []
        ran = bool(argv) and argv != own
        waited = time.monotonic() - t0
        if ran or waited >= limit:
            return {"program": program, "confirmed": ran, "waited_s": round(waited, 6),
                    "looks": looks}
        time.sleep(pause)
        pause = min(pause * 2, _POLL_S[1])


def collect(pid: int, program: str | None = None, limit: float | None = None) -> dict:
    """pid, create time, boot id, argv, exe, uid and the parent chain of the launcher,
    read once it runs `program` (or at once, with none given: `exec` is then null)."""
    try:
        p = psutil.Process(pid)
        seen = None if program is None else _exec(
            p, program, EXEC_WAIT_S if limit is None else limit)
        launcher = {**_proc(p), "exec": seen}
        parents = []
        for parent in p.parents()[:3]:
            try:
                parents.append(_proc(parent))
            except psutil.Error:
                break
    except psutil.NoSuchProcess:
        return {"schema": "harness.measure.witness.launcher/v1", "pid": pid, "boot_id": boot_id(),
                "error": "the launcher exited before it could be witnessed"}
    return {"schema": "harness.measure.witness.launcher/v1", "boot_id": boot_id(), **launcher,
            "parent": parents[0] if parents else None, "ancestors": parents[1:]}


"""Witness of the launcher: the `docker run` process, taken the moment it starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.measure.runfolder import layout
from harness.measure.witness.base import LAUNCHED, Subject


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
            u = p.uids()
            g = p.gids()
            info["uids"] = {"real": u.real, "effective": u.effective, "saved": u.saved}
            info["gids"] = {"real": g.real, "effective": g.effective, "saved": g.saved}
        except (psutil.AccessDenied, psutil.ZombieProcess):
            info["uids"] = info["gids"] = None
    return info


def collect(pid: int) -> dict:
    """pid, create time, boot id, argv, exe, uid and the parent chain of the launcher."""
    try:
        p = psutil.Process(pid)
        launcher = _proc(p)
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


@dataclass(frozen=True)
class LauncherWitness:
    name: str = "launcher"
    moment: str = LAUNCHED
    file: str = layout.LAUNCHER_WITNESS

    def collect(self, subject: Subject) -> dict:
        return collect(subject.launcher_pid)


WITNESS = LauncherWitness()

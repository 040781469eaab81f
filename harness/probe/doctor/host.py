"""Thin I/O shells that gather the facts only the doctor judges: images, devices, paths.

Nothing here decides ok/warn/fail; that is harness.judge.doctor.checks. The GPU tools and
the engine's own facts are gathered by measure.host.tools and measure.engine, which a run's
host snapshot shares. Every probe returns plain data and turns an absent image or path into
data.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker.errors

from harness.judge.doctor.checks import DeviceNode

ENGINE_TIMEOUT_S = 10


# --------------------------------------------------------------------------- Docker


def image_ids(
    client: Any, expected: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """For each lock entry: the local Id found by its locked Id, and the Id its tag points at.

    Lookups are local only (`images.get`); nothing is ever pulled.
    """
    found: dict[str, str | None] = {}
    by_ref: dict[str, str | None] = {}
    for name, entry in expected.items():
        found[name] = _local_id(client, str((entry or {}).get("id") or ""))
        ref = (entry or {}).get("ref")
        by_ref[name] = _local_id(client, str(ref)) if ref and found[name] is None else None
    return found, by_ref


def _local_id(client: Any, key: str) -> str | None:
    if not key:
        return None
    try:
        return client.images.get(key).id
    except (docker.errors.ImageNotFound, docker.errors.NullResource):
        return None
    except (docker.errors.APIError, OSError):
        return None


# --------------------------------------------------------------------------- devices


def device_node(path: str) -> DeviceNode:
    try:
        st = os.stat(path)
    except OSError:
        return DeviceNode(path=path, exists=False)
    return DeviceNode(
        path=path, exists=True, mode=st.st_mode, gid=st.st_gid, group=group_name(st.st_gid)
    )


def group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def render_nodes(dri: str = "/dev/dri") -> list[DeviceNode]:
    return [device_node(str(p)) for p in sorted(Path(dri).glob("renderD*"))]


def current_user() -> tuple[str, int, set[int]]:
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return name, uid, {os.getgid(), *os.getgroups()}


# --------------------------------------------------------------------------- paths


def lock_facts(path: Path) -> dict[str, Any]:
    """Whether the lock file could be opened for writing, without opening it. A symlink is
    not a lock file: `harness run` refuses to open one (a group member may have planted it)."""
    parent = path.parent
    return {
        "path": str(path),
        "exists": os.path.lexists(path),
        "is_file": path.is_file() and not path.is_symlink(),
        "writable": os.access(path, os.W_OK),
        "parent": str(parent),
        "parent_exists": parent.is_dir(),
        "parent_writable": os.access(parent, os.W_OK | os.X_OK),
    }


def free_space(runs_dir: Path) -> tuple[str, int | None]:
    """Free bytes where the runs folder is or will be (its nearest existing ancestor)."""
    here = runs_dir.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        return str(here), shutil.disk_usage(here).free
    except OSError:
        return str(here), None

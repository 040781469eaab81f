"""Thin I/O shells that gather the facts only the doctor judges (images, devices, paths),
as plain data; `judge.doctor.checks` decides."""

from __future__ import annotations

import grp
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker.errors

from harness.judge.doctor.checks import DeviceNode
from harness.measure.gpuproc import user_of

ENGINE_TIMEOUT_S = 10


def image_ids(client: Any, expected: Mapping[str, Mapping[str, Any]],
              ) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """For each lock entry: the local Id by its locked Id, and the Id its tag points at;
    local lookups only, never a pull."""
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
    except (docker.errors.APIError, docker.errors.NullResource, OSError):
        return None  # ImageNotFound is an APIError


def device_node(path: str) -> DeviceNode:
    try:
        st = os.stat(path)
    except OSError:
        return DeviceNode(path=path, exists=False)
    return DeviceNode(path=path, exists=True, mode=st.st_mode, gid=st.st_gid,
                      group=group_name(st.st_gid))


def group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def render_nodes(dri: str = "/dev/dri") -> list[DeviceNode]:
    return [device_node(str(p)) for p in sorted(Path(dri).glob("renderD*"))]


def current_user() -> tuple[str, int, set[int]]:
    uid = os.getuid()
    return user_of(uid), uid, {os.getgid(), *os.getgroups()}


def lock_facts(path: Path) -> dict[str, Any]:
    """Could the lock be opened for writing (never a symlink)? Without opening it."""
    parent = path.parent
    return {"path": str(path), "exists": os.path.lexists(path),
            "is_file": path.is_file() and not path.is_symlink(),
            "writable": os.access(path, os.W_OK), "parent": str(parent),
            "parent_exists": parent.is_dir(),
            "parent_writable": os.access(parent, os.W_OK | os.X_OK)}


def free_space(runs_dir: Path) -> tuple[str, int | None]:
    """Free bytes where the runs folder is or will be (its nearest existing ancestor)."""
    here = runs_dir.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        return str(here), shutil.disk_usage(here).free
    except OSError:
        return str(here), None

"""Thin I/O shells that gather the facts the doctor judges: tools, Docker, devices, paths.

Nothing here decides ok/warn/fail; that is checks.py. Every probe returns plain data and
turns an absent tool, a dead engine or a missing path into data, never an exception.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors

from harness.doctor.checks import DeviceNode, ToolRun

ROCM_BIN = "/opt/rocm/bin"
ENGINE_TIMEOUT_S = 10


def default_search_path() -> str:
    """PATH, then /opt/rocm/bin: ROCm installs its tools there without touching PATH."""
    return os.pathsep.join(p for p in (os.environ.get("PATH", ""), ROCM_BIN) if p)


def run_tool(argv: list[str], *, timeout: float = 20.0, search_path: str | None = None) -> ToolRun:
    """Run one read-only tool with a timeout; every way it can go wrong becomes a ToolRun."""
    tool = argv[0]
    exe = shutil.which(tool, path=search_path if search_path is not None else default_search_path())
    if exe is None:
        return ToolRun(tool=tool, found=False)
    try:
        proc = subprocess.run(
            [exe, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            errors="replace",
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ToolRun(tool=tool, found=True, error=f"timed out after {timeout:g}s")
    except OSError as e:
        return ToolRun(tool=tool, found=True, error=f"could not start: {e.strerror or e}")
    return ToolRun(
        tool=tool, found=True, returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr
    )


def rocminfo(timeout: float = 20.0, search_path: str | None = None) -> ToolRun:
    return run_tool(["rocminfo"], timeout=timeout, search_path=search_path)


def amd_smi_static(timeout: float = 20.0, search_path: str | None = None) -> ToolRun:
    return run_tool(["amd-smi", "static", "--json"], timeout=timeout, search_path=search_path)


# --------------------------------------------------------------------------- Docker


def docker_client(timeout: int = ENGINE_TIMEOUT_S) -> tuple[Any | None, str | None]:
    """A client for the local engine, or the reason there is none."""
    try:
        return docker.from_env(timeout=timeout), None
    except (docker.errors.DockerException, OSError) as e:
        return None, _short(e)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def engine_facts(client: Any | None) -> tuple[dict | None, dict | None, str | None]:
    """(version, info, error) from the engine; error is set when it does not answer."""
    if client is None:
        return None, None, "no Docker client"
    try:
        return client.version(), client.info(), None
    except (docker.errors.DockerException, OSError) as e:
        return None, None, _short(e)


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

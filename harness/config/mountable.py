"""Where a mount may come from: under the campaign's mount roots, and never a system path
(nor the Docker socket's folder), judged on real paths. The loader asks it of each source
at load, the launch again under the lock, and the seal before it reads a mounted file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# Host paths no mount may be, contain or lie inside, even read-only: a read-only bind of a
# folder holding a Unix socket still lets the workload connect to it (docker.sock = root).
SYSTEM_PATHS = ("/proc", "/sys", "/dev", "/run", "/var/run", "/boot", "/etc")
DOCKER_SOCKET = "/var/run/docker.sock"


def system_paths(env: Mapping[str, str]) -> list[Path]:
    """The system paths, as written and resolved, plus the Docker socket (the default one and
    `DOCKER_HOST=unix://...`) and its folder."""
    spots = [Path(p) for p in SYSTEM_PATHS]
    sockets = [DOCKER_SOCKET]
    host = env.get("DOCKER_HOST", "")
    if host.startswith("unix://") and host[len("unix://"):]:
        sockets.append(os.path.abspath(host[len("unix://"):]))
    for sock in map(Path, sockets):
        spots += [sock, sock.parent]
    out = {Path(os.path.normpath(p)) for p in spots} | {Path(os.path.realpath(p)) for p in spots}
    return sorted(out)


def overlaps(a: Path, b: Path) -> bool:
    """Pure: is `a` equal to `b`, inside it, or an ancestor of it?"""
    return a == b or a in b.parents or b in a.parents


def system_hit(real: Path, system: list[Path]) -> Path | None:
    """Pure: the system path that the (already resolved) `real` is, contains or lies inside;
    `/` itself always hits."""
    if real == Path("/"):
        return real
    return next((s for s in system if overlaps(real, s)), None)


def within(real: Path, roots: list[Path]) -> bool:
    """Pure: is the (already resolved) `real` one of `roots` or inside one?"""
    return any(real == r or r in real.parents for r in roots)


def mountable(real: Path, roots: list[Path]) -> bool:
    """May this real path be mounted: under a root, and no system path."""
    return within(real, roots) and system_hit(real, system_paths(os.environ)) is None

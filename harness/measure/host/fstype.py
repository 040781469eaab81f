"""Which file system a path lives on, and whether it is shared over a network.

A flock on a home directory on NFS is every host's lock (or none at all), so in a Slurm
job a network file system refuses the GPU lock, and on one host it is a warning."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# Kernel type names (mountinfo's fstype) of file systems shared between hosts.
NETWORK = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "fuse.sshfs", "sshfs", "ceph",
    "fuse.ceph", "fuse.ceph-fuse", "glusterfs", "fuse.glusterfs", "beegfs", "ocfs2", "gfs2",
    "afs", "9p", "fuse.s3fs", "fuse.gcsfuse", "orangefs", "pvfs2", "davfs", "fuse.davfs",
    "fuse.juicefs", "wekafs", "panfs", "virtiofs"})
# Where `stat -f -c %T` prints its own name for one of them, not the kernel's.
_STAT_NAMES = {"smb2": "smb3"}
MOUNTINFO = Path("/proc/self/mountinfo")
MAX_MOUNTINFO = 8 * 1024 * 1024


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def fs_type_of(mountinfo: str, path: str) -> str | None:
    """The fstype of the mount holding the absolute, resolved `path`, or None. Pure."""
    best: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if not sep or len(fields) < 5 or not after:
            continue
        point = _unescape(fields[4])
        inside = path == point or point == "/" or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), after[0])
    return best[1] if best else None


def is_network(fstype: str | None) -> bool:
    """True for a file system shared between hosts (fuse.sshfs, nfs4, lustre, ...). Pure."""
    return fstype is not None and fstype.lower() in NETWORK


def existing_parent(path: Path) -> Path:
    """The deepest folder of `path` that exists (the lock file may not exist yet)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def fs_type(path: Path) -> str | None:
    """The fstype under `path` (its deepest existing folder), or None when unknown."""
    where = os.path.realpath(existing_parent(path))
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as f:
            found = fs_type_of(f.read(MAX_MOUNTINFO), where)
        if found is not None:
            return found
    except OSError:
        pass
    try:
        r = subprocess.run(["stat", "-f", "-c", "%T", where], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    name = r.stdout.strip()
    return _STAT_NAMES.get(name, name) if r.returncode == 0 and name else None


SLURM_HINTS = ("SLURM_JOB_ID", "SLURMD_NODENAME", "SLURM_CONF")


def under_slurm(environ: dict[str, str] | os._Environ) -> bool:
    """True in a Slurm job or slurmd's programs, where a network lock is every host's."""
    return any(environ.get(name) for name in SLURM_HINTS)


def lock_fs_problem(lock_path: str, fstype: str | None, slurm: bool) -> tuple[str, str] | None:
    """("fail" | "warn", message) when the lock is on a network file system, else None."""
    if not is_network(fstype):
        return None
    message = (f"the GPU lock {lock_path} is on a network file system ({fstype}): every host "
               "that mounts it shares one lock; put it on local disk (campaign `lock:`, e.g. "
               "/var/lib/harness/gpu.lock or /tmp/gpu.lock)")
    return ("fail", message) if slurm else ("warn", message + " (one host: a warning)")

"""The mount policy, in one place: what a mount source may be, judged on real paths.

A source is judged twice by the same pure `judge`: at load as declared, so `harness check`
faults the line, and at launch under the GPU lock where it then leads, because an earlier
control's read-write mount can plant a symlink on a declared path.
"""

from __future__ import annotations

import os
import posixpath
import stat
import subprocess
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.base.catalogue import (
    ENV_MOUNT_SOURCE,
    MOUNT_OUTSIDE_ROOTS,
    MOUNT_OVER_HARNESS,
    MOUNT_SOURCE_KIND,
    MOUNT_SYSTEM_PATH,
)
from harness.base.reason import Reason
from harness.instrument.harness_observer.interface import INSTRUMENT_TARGET, OBSERVATIONS_TARGET

# ---- syntax ---------------------------------------------------------------------------------

# What means something in docker's `--mount` CSV (`,` `=` quotes) or hides a path (`\`).
MOUNT_SPECIALS = frozenset(',"\'=\\')
# Where the vector mounts the instrument and observations (the host/container interface's)
RESERVED_TARGETS = (INSTRUMENT_TARGET, OBSERVATIONS_TARGET)


def digested(read_only: object, sealed: object) -> bool:
    """Pure: does a mount need its content digested at preflight: every mount but a sealed
    read-only one (whose files the source seal hashes). Takes the recorded values too, so
    anything but a true boolean on both counts as digested."""
    return not (read_only is True and sealed is True)


def path_text_problem(value: str) -> str | None:
    """Why `value` cannot appear in a mount argument (None: it can). Pure, shared by the
    schema (`harness check`) and the vector (every `--mount` it emits)."""
    if not value:
        return "must not be empty"
    for ch in value:
        if ch in MOUNT_SPECIALS:
            return f"must not contain {ch!r} (it would change the meaning of a docker argument)"
        if unicodedata.category(ch)[0] in "CZ":
            return f"must not contain whitespace or control characters (found {ch!r})"
    return None


def plain_path_problem(value: str) -> str | None:
    """Why `value` is not a plain, normalised absolute path (None: it is)."""
    if (why := path_text_problem(value)) is not None:
        return why
    if not value.startswith("/"):
        return "must be an absolute path"
    if value.startswith("//") or posixpath.normpath(value) != value:
        return "must be normalised (no '//', '/./', '..', or trailing '/')"
    return None


def target_problem(target: str) -> str | None:
    """Why a control's or model's mount target is unusable (None: it is fine)."""
    if (why := plain_path_problem(target)) is not None:
        return why
    if target == "/":
        return "must not be '/'"
    for reserved in RESERVED_TARGETS:
        if target == reserved or target.startswith(reserved + "/"):
            return f"is reserved by the harness ({reserved})"
    return None


# ---- geometry and system paths ----------------------------------------------------------------

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


def place(real: Path, roots: list[Path], system: list[Path]) -> tuple[str, Path | None] | None:
    """Pure: (rule, the system path it hit) when a mount may not lead to `real` at all
    (outside the roots, a system path), None when it may."""
    if not within(real, roots):
        return MOUNT_OUTSIDE_ROOTS, None
    if (hit := system_hit(real, system)) is not None:
        return MOUNT_SYSTEM_PATH, hit
    return None


def mountable(real: Path, roots: list[Path]) -> bool:
    """May this real path be mounted: under a root, and no system path."""
    return place(real, roots, system_paths(os.environ)) is None


# ---- protected paths ----------------------------------------------------------------------------

HARNESS_DIR = Path(__file__).resolve().parent.parent  # the harness's own code
# The project's code and inputs, relative to the project folder: what `make image`,
# `make`, the scripts and the tests run next, the other campaigns, and the sealed runs of
# other nights in the default runs folder.
PROJECT_CODE = ("Makefile", "pyproject.toml", "campaigns", "controls", "images", "scripts",
                "tests", "benchmarks", "docs", ".ci", ".git", "harness", "gpu-runs")
GIT_TIMEOUT_S = 10
MAX_GIT_FILES = 100_000


def git_files(project: Path) -> list[Path]:
    """Every file git tracks in `project` (when it is a checkout), outside PROJECT_CODE;
    at most MAX_GIT_FILES, and none when git fails, is missing or takes too long."""
    if not os.path.lexists(project / ".git"):
        return []
    try:
        r = subprocess.run(["git", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
                            "-C", str(project), "ls-files", "-z"],
                           stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if r.returncode != 0:
        return []
    names = [os.fsdecode(n) for n in r.stdout.split(b"\0")[:MAX_GIT_FILES] if n]
    return [project / n for n in names if n.split("/", 1)[0] not in PROJECT_CODE]


def _spots(path: Path) -> set[Path]:
    """Where `path` lives: the entry itself (its folder resolved, so a symlink there is
    covered too) and what it leads to."""
    p = Path(os.path.abspath(path))
    return {Path(os.path.realpath(p.parent)) / p.name, Path(os.path.realpath(p))}


def protected_paths(*, runs_dir: Path, lock: Path, project: Path,
                    inputs: Iterable[Path]) -> list[Path]:
    """Real paths no read-write mount may be, contain or lie inside: the evidence, the
    lock, the harness's code and Python, every input the next run reads, and the project's
    own code and tracked files."""
    trusted = [runs_dir, lock, HARNESS_DIR, Path(sys.prefix), Path(sys.base_prefix), *inputs,
               *(project / name for name in PROJECT_CODE), *git_files(project)]
    return sorted(set().union(*map(_spots, trusted)))


# ---- the judge ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MountSource:
    """A mount source: where the control says, and where that leads now."""

    what: str  # e.g. "mounts[0]" or "model"
    declared: Path
    real: Path
    kind: str | None  # "dir", "file", another kind, or None when it cannot be reached
    read_only: bool


def kind_of(path: Path) -> str | None:
    """"dir", "file", "special file", or None when `path` cannot be reached."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "special file"


def locate(what: str, declared: Path, read_only: bool) -> MountSource:
    """Where `declared` leads now: every symlink resolved, and what it is there."""
    real = Path(os.path.realpath(declared))
    return MountSource(what, declared, real, kind_of(real), read_only)


def judge(src: MountSource, roots: list[Path], protected: list[Path],
          system: list[Path]) -> list[Reason]:
    """Pure: may `src` be mounted now? `protected` are real paths no read-write mount may
    contain or lie inside (`protected_paths`); `system` are host paths no mount at all may
    be, contain or lie inside (`system_paths`)."""
    shown = f"{src.what}: {src.declared}" + (f" (resolves to {src.real})"
                                             if src.real != src.declared else "")
    found = place(src.real, roots, system)
    if found is not None and found[0] == MOUNT_OUTSIDE_ROOTS:
        return [Reason(MOUNT_OUTSIDE_ROOTS, f"{shown} is outside the mount roots "
                       f"({', '.join(map(str, roots))}) at launch")]
    if found is not None:
        return [Reason(MOUNT_SYSTEM_PATH, f"{shown} overlaps the system path {found[1]}; no "
                       "mount may be, contain or lie inside one, even read-only")]
    if src.kind is None:
        return [Reason(ENV_MOUNT_SOURCE, f"{shown} does not exist at launch")]
    if src.kind not in ("dir", "file"):
        return [Reason(MOUNT_SOURCE_KIND, f"{shown} is a {src.kind}, not a folder or a "
                       "regular file")]
    if not src.read_only:
        hit = [p for p in protected if overlaps(src.real, p)]
        if hit:
            return [Reason(MOUNT_OVER_HARNESS, f"{shown} is read-write and overlaps "
                           f"{hit[0]}, which the harness trusts (evidence, lock, code or "
                           "the campaign's inputs)")]
    return []


def declared_problem(host: Path, roots: list[Path], system: list[Path]) -> str | None:
    """Why a source as a control declares it may not be mounted, in `harness check`'s
    words; None when it may. Judged again at launch (`judge`): a folder may be swapped."""
    if (why := plain_path_problem(str(host))) is not None:
        return f"resolves to {str(host)!r}, which {why}"
    found = place(Path(os.path.realpath(host)), roots, system)
    if found is not None and found[0] == MOUNT_OUTSIDE_ROOTS:
        return (f"{host} is outside the allowed mount roots ({', '.join(map(str, roots))}); "
                "add its folder to the campaign's mount_roots")
    if found is not None:
        return (f"{host} overlaps the system path {found[1]} ({MOUNT_SYSTEM_PATH}: never "
                "mountable, even read-only)")
    return None

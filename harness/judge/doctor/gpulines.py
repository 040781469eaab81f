"""The doctor's lines for the host's GPU map (harness.config.gpumapfile): is it what Slurm
hands out?

A job's container gets only the render nodes the map names, so a wrong map gives a job no
GPU or another job's. A gres.conf that cannot be parsed fails: what Slurm hands out cannot
be known, so the node is not fit. Pure."""

from __future__ import annotations

import stat
from dataclasses import dataclass, field

from harness.config.gpumapfile import GpuMap
from harness.judge.doctor.checks import Check, DeviceNode


@dataclass(frozen=True)
class MapFacts:
    """What the probes found: the map (or why none), its devices, gres.conf's files."""

    path: str
    required: bool  # a Slurm GPU node, or the map was named: absence fails
    gmap: GpuMap | None = None
    error: str | None = None  # the map exists but is invalid (file:line:col)
    devices: dict[str, DeviceNode] = field(default_factory=dict)
    real: dict[str, str] = field(default_factory=dict)  # path -> its real path
    node: str = ""
    gres_where: str = ""
    gres_files: list[str] | None = None
    gres_error: str | None = None  # not compared: absent, not ours to read, not read here
    gres_bad: str | None = None  # there, but not parseable: a failure


def judge_map(f: MapFacts) -> Check | None:
    """The `gpu-map` line, or None for a host with no map that needs none."""
    if f.error is not None:
        return Check("gpu-map", "fail", f.error)
    if f.gmap is None:
        if not f.required:
            return None
        return Check("gpu-map", "fail", f"no GPU map at {f.path}: a Slurm job's container "
                     "could get no GPU (docs/slurm.md, 'The GPU map')")
    bad = []
    for index in sorted(f.gmap.gpus):
        path = f.gmap.gpus[index]
        node = f.devices.get(path) or DeviceNode(path, False)
        if not node.exists:
            bad.append(f"GPU {index}: {path} does not exist")
        elif not stat.S_ISCHR(node.mode):
            bad.append(f"GPU {index}: {path} is not a character device")
    owners: dict[str, int] = {}
    for index in sorted(f.gmap.gpus):
        real = f.real.get(f.gmap.gpus[index], f.gmap.gpus[index])
        if real in owners:
            bad.append(f"GPU {index} and GPU {owners[real]} are the same device {real}")
        owners.setdefault(real, index)
    if bad:
        return Check("gpu-map", "fail", f"{f.path}: {'; '.join(bad)}")
    return Check("gpu-map", "ok", f"{f.path}: {len(f.gmap.gpus)} GPU(s): {f.gmap.describe()}")


def judge_gres(f: MapFacts) -> Check | None:
    """The `gpu-map-gres` line: the map against gres.conf, index by index."""
    if f.gmap is None:
        return None
    if f.gres_bad is not None:
        return Check("gpu-map-gres", "fail", f"gres.conf at {f.gres_where} {f.gres_bad}: "
                     "which device Slurm gives each GPU index cannot be known")
    if f.gres_files is None:
        why = f.gres_error or f"names no GPU File= for node {f.node!r}"
        return Check("gpu-map-gres", "warn",
                     f"gres.conf at {f.gres_where} {why}: indexes not compared")
    slurm = {i: path for i, path in enumerate(f.gres_files)}
    wrong = []
    for index in sorted(set(slurm) | set(f.gmap.gpus)):
        mine, theirs = f.gmap.gpus.get(index), slurm.get(index)
        if mine is None:
            wrong.append(f"GPU {index} ({theirs}) is missing from the map")
        elif theirs is None:
            wrong.append(f"GPU {index}: node {f.node} has only {len(slurm)} GPU(s) in gres.conf")
        elif f.real.get(mine, mine) != f.real.get(theirs, theirs):
            wrong.append(f"GPU {index}: the map says {mine}, gres.conf says {theirs}")
    if wrong:
        return Check("gpu-map-gres", "fail", f"{f.gres_where} (node {f.node}): "
                     + "; ".join(wrong))
    return Check("gpu-map-gres", "ok", f"matches {f.gres_where}: node {f.node}'s "
                 f"{len(slurm)} GPU(s), index by index")


def judge(f: MapFacts) -> list[Check]:
    return [c for c in (judge_map(f), judge_gres(f)) if c is not None]

"""Gathers the facts the doctor's GPU-map lines judge (harness.judge.doctor.gpulines): the map,
its devices, and what gres.conf gives each GPU index on this node. Every fault becomes data."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from harness.base.bounds import BadText
from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_text_bounded
from harness.config import gpumapfile
from harness.judge.doctor.gpulines import MapFacts
from harness.measure.slurm import gres
from harness.probe.doctor.hostfacts import device_node

MAX_GRES_BYTES = 1024 * 1024


def node_name(environ: Mapping[str, str]) -> str:
    """This node's Slurm name: SLURMD_NODENAME, else the short host name."""
    return environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]


def _gres_files(where: Path, node: str) -> tuple[list[str] | None, str | None, str | None]:
    """gres.conf's files for `node`, why they were not compared (a warning: absent or
    unreadable, as on configless clusters), and why it cannot be used (unparseable)."""
    try:
        text = read_text_bounded(where, MAX_GRES_BYTES, "gres.conf", follow_symlinks=True)
    except InputError as e:
        why = f"is not readable ({e.message.removeprefix(f'{where}: ')})"
        return (None, None, why) if os.access(where, os.R_OK) else (None, why, None)
    try:
        return gres.gpu_files(text, node), None, None
    except BadText as e:
        return None, None, f"cannot be parsed ({e.message.removeprefix('gres.conf ')})"
    except gres.Unsupported as e:
        return None, f"is not read by this check ({str(e).removeprefix('gres.conf ')})", None


def gather(environ: Mapping[str, str], *, given: Path | None, required: bool,
           gres_conf: Path | None = None) -> MapFacts:
    """Read the map, stat its devices, read gres.conf: every fault becomes data."""
    path = gpumapfile.map_path(environ, given)
    required = required or given is not None or bool(environ.get(gpumapfile.ENV_VAR))
    if not os.path.lexists(path):
        return MapFacts(str(path), required)
    try:
        gmap = gpumapfile.load_map(path)
    except InvalidInput as e:
        return MapFacts(str(path), required, error="; ".join([e.message, *e.faults])[:2000])
    node = node_name(environ)
    where = gres_conf or gres.gres_conf_path(environ)
    files, problem, bad = _gres_files(where, node)
    paths = {*gmap.gpus.values(), *(files or [])}
    return MapFacts(str(path), required, gmap,
                    devices={p: device_node(p) for p in gmap.gpus.values()},
                    real={p: os.path.realpath(p) for p in paths}, node=node,
                    gres_where=str(where), gres_files=files, gres_error=problem,
                    gres_bad=bad)

"""The host's GPU map (/etc/harness/gpu-map.yaml or $HARNESS_GPU_MAP): Slurm GPU index ->
render node. A job sees only its indexes, and gres.conf may be absent or use patterns, so
the map says it plainly. Every value is hostile; faults carry `file:line:col`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.config.yamlsafe import Document, Fault, YamlFaults, load

DEFAULT_PATH = Path("/etc/harness/gpu-map.yaml")
ENV_VAR = "HARNESS_GPU_MAP"
MAX_GPUS = 64
MAX_PATH = 255
_INDEX = re.compile(r"0|[1-9][0-9]{0,3}")
_NODE = re.compile(r"/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


@dataclass(frozen=True)
class GpuMap:
    """A valid map: Slurm GPU index -> render node path, and where each entry stands."""

    file: str
    gpus: dict[int, str]
    lines: dict[int, int] = field(default_factory=dict)

    def describe(self) -> str:
        return ", ".join(f"{i} -> {self.gpus[i]}" for i in sorted(self.gpus))


def map_path(environ: Mapping[str, str], given: Path | None = None) -> Path:
    """The map file: the one given (a command-line option), else HARNESS_GPU_MAP, else the
    documented default."""
    if given is not None:
        return given
    value = environ.get(ENV_VAR, "")
    return Path(value) if value else DEFAULT_PATH


def node_problem(value: object) -> str | None:
    """Why `value` cannot be a render node path, or None."""
    if not isinstance(value, str):
        return f"must be a device path (text), not {type(value).__name__}"
    if len(value) > MAX_PATH:
        return f"must be at most {MAX_PATH} characters"
    if not _NODE.fullmatch(value):
        return ("must be an absolute path of letters, digits, '.', '_', '-' and '/' "
                "(e.g. /dev/dri/renderD128)")
    if any(part in (".", "..") for part in value.split("/")):
        return "must be normalised (no '.' or '..' parts)"
    return None


def parse(doc: Document) -> tuple[GpuMap | None, list[Fault]]:
    """Validate a loaded map document. Pure."""
    data = doc.data
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        return None, [doc.fault((), f"expected a mapping with a 'gpus' key, got {kind}")]
    faults = [doc.fault((key,), f"unknown key {key!r} (the map has only 'gpus')", key=True)
              for key in data if key != "gpus"]
    gpus = data.get("gpus")
    if not isinstance(gpus, dict) or not gpus:
        faults.append(doc.fault(("gpus",) if "gpus" in data else (),
                                "'gpus' must map each Slurm GPU index to its render node"))
        return None, faults
    if len(gpus) > MAX_GPUS:
        faults.append(doc.fault(("gpus",), f"at most {MAX_GPUS} GPUs, not {len(gpus)}"))
    out: dict[int, str] = {}
    lines: dict[int, int] = {}
    seen: dict[str, int] = {}
    for key, value in gpus.items():
        if not _INDEX.fullmatch(str(key)):
            faults.append(doc.fault(("gpus", key), f"GPU index {key!r} must be a whole "
                                    "number 0..9999 without leading zeros", key=True))
            continue
        problem = node_problem(value)
        line = doc.where(("gpus", key))[0]
        if problem is not None:
            faults.append(doc.fault(("gpus", key), f"GPU {key}: render node {problem}"))
        elif value in seen:
            faults.append(doc.fault(("gpus", key), f"GPU {key}: {value} is already GPU "
                                    f"{seen[value]}'s (line {lines[seen[value]]}); "
                                    "each render node belongs to one index"))
        else:
            out[int(key)], lines[int(key)], seen[value] = value, line, int(key)
    if faults:
        return None, faults
    return GpuMap(doc.file, out, lines), []


def load_map(path: Path) -> GpuMap:
    """Read and validate the map; InvalidInput (exit 2) with `file:line:col` faults."""
    try:
        doc = load(path, "GPU map")
    except YamlFaults as e:
        raise InvalidInput(f"{path}: not a valid GPU map",
                           faults=[str(f) for f in e.faults]) from None
    gmap, faults = parse(doc)
    if gmap is None:
        raise InvalidInput(f"{path}: not a valid GPU map", faults=[str(f) for f in faults])
    return gmap


def nodes_for(gmap: GpuMap, indexes: tuple[int, ...]) -> tuple[tuple[str, ...], list[int]]:
    """The render nodes of `indexes`, in their order, and the indexes the map lacks. Pure."""
    missing = [i for i in indexes if i not in gmap.gpus]
    return tuple(gmap.gpus[i] for i in indexes if i in gmap.gpus), missing

"""Which device files gres.conf gives a node's GPUs, in Slurm's index order. Pure.

Why: the doctor checks the host's GPU map (harness.config.gpumap) against what Slurm itself
hands out. A job sees only indexes (`SLURM_JOB_GPUS`); Slurm numbers a node's GPUs in the
order of their `File=` entries in gres.conf (`slurmd -G` lists them in that order; with
`File=/dev/dri/renderD128` listed first, the job given index 0 runs on renderD128).

Read here: lines `[NodeName=HOSTLIST] Name=gpu ... File=PATH` (a File may be a range such
as `/dev/dri/renderD[128-131]`), key names in any case, `#` comments. Not read: `Include`,
`AutoDetect` (then there are no files: the answer is None, and the doctor says so), and
hostlists beyond one bracket group per name. The file is a site admin's, but a node must
never trust it further than a comparison: nothing read here reaches an argv.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

MAX_EXPAND = 4096
_BRACKET = re.compile(r"^([^\[\]]*)\[([0-9,\-]+)\]([^\[\]]*)$")


def gres_conf_path(environ: Mapping[str, str]) -> Path:
    """gres.conf sits beside slurm.conf (`SLURM_CONF`, else /etc/slurm/slurm.conf)."""
    conf = environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    return Path(os.path.dirname(conf) or ".") / "gres.conf"


def expand(pattern: str) -> list[str] | None:
    """`node[1-3,7]` -> node1 node2 node3 node7; zero-padded ranges keep their width;
    a comma list outside brackets is split. None when the pattern is not understood."""
    out: list[str] = []
    for part in _split_top(pattern):
        m = _BRACKET.match(part)
        if "[" not in part and "]" not in part:
            out.append(part)
            continue
        if m is None:
            return None
        head, body, tail = m.groups()
        for item in body.split(","):
            low, _, high = item.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                return None
            end = int(high) if high else int(low)
            if end < int(low) or len(out) + end - int(low) >= MAX_EXPAND:
                return None
            width = len(low) if low.startswith("0") else 0
            out += [f"{head}{n:0{width}d}{tail}" for n in range(int(low), end + 1)]
    return out


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p for p in [*parts, cur] if p]


def _fields(line: str) -> dict[str, str]:
    out = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            out[key.lower()] = value
    return out


def gpu_files(text: str, node: str) -> list[str] | None:
    """The node's GPU device files in gres.conf order, or None when gres.conf names none
    for it (auto-detection, or no line for this node) or a line cannot be read."""
    files: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        fields = _fields(line)
        if fields.get("name", "").lower() != "gpu":
            continue
        if "nodename" in fields:
            nodes = expand(fields["nodename"])
            if nodes is None:
                return None
            if node not in nodes:
                continue
        if "file" not in fields:
            return None
        found = expand(fields["file"])
        if found is None:
            return None
        files += found
    return files or None

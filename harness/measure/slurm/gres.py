"""Which device files gres.conf gives a node's GPUs, in Slurm's index order. Pure.

A job sees only indexes; Slurm numbers a node's GPUs in the order of their `File=`
entries, so the doctor compares the host's GPU map with this. Not read: `Include`,
`AutoDetect` (answer None) and multi-bracket hostlists (`Unsupported`). Nothing read here
reaches an argv; every number and range is bounded (`BadText` with its line number)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from harness.base import bounds
from harness.base.bounds import BadText

MAX_EXPAND = 4096  # files one File= may stand for
MAX_NODES = 64 * 1024  # names one NodeName= range may stand for: counted, never expanded
MAX_LINE = 16 * 1024
_WELL = re.compile(r"[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*")  # brackets paired, never nested
_PART = re.compile(r"(?:[^,\[\]]|\[[^\[\]]*\])+")  # one name of a list: commas in brackets
_GROUP = re.compile(r"\[([^\[\]]*)\]")


class Unsupported(ValueError):
    """Text Slurm reads that this module does not (several bracket groups in one name)."""


def gres_conf_path(environ: Mapping[str, str]) -> Path:
    """gres.conf sits beside slurm.conf (`SLURM_CONF`, else /etc/slurm/slurm.conf)."""
    conf = environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    return Path(os.path.dirname(conf) or ".") / "gres.conf"


def _parts(pattern: str, max_elements: int) -> list[tuple[str, list[bounds.Span] | None, str]]:
    """Each name of a hostlist as (head, the spans of its bracket or None, tail)."""
    if not _WELL.fullmatch(pattern):
        raise BadText(f"{bounds.shown(pattern)} has unpaired or nested brackets")
    out = []
    for part in _PART.findall(pattern):
        groups = _GROUP.findall(part)
        if len(groups) > 1:
            raise Unsupported(f"{bounds.shown(part)} has {len(groups)} bracket groups")
        if not groups:
            out.append((part, None, ""))
            continue
        head, _, rest = part.partition("[")
        body, _, tail = rest.partition("]")
        spans = bounds.parse_ranges(body, "range", max_elements=max_elements)
        out.append((head, spans, tail))
    return out


def count(pattern: str, max_elements: int = MAX_EXPAND) -> int:
    """How many names a hostlist stands for, without expanding it; bounded."""
    total = sum(sum(map(len, spans)) if spans is not None else 1
                for _, spans, _ in _parts(pattern, max_elements))
    if total > max_elements:
        raise BadText(f"{bounds.shown(pattern)} stands for more than {max_elements} names")
    return total


def expand(pattern: str, max_elements: int = MAX_EXPAND) -> list[str]:
    """`node[1-3,7]` -> node1 node2 node3 node7 (padding kept); counted before expanding."""
    count(pattern, max_elements)
    out = []
    for head, spans, tail in _parts(pattern, max_elements):
        out += [head] if spans is None else [f"{head}{n}{tail}" for s in spans for n in s.names()]
    return out


def names_node(pattern: str, node: str) -> bool:
    """Whether the hostlist `pattern` names `node`: counted, never expanded."""
    for head, spans, tail in _parts(pattern, MAX_NODES):
        if spans is None:
            if head == node:
                return True
            continue
        middle = node[len(head):len(node) - len(tail)]
        if len(node) > len(head) + len(tail) and node.startswith(head) \
                and node.endswith(tail) and any(s.holds(middle) for s in spans):
            return True
    return False


def _fields(line: str) -> dict[str, str]:
    pairs = (word.partition("=") for word in bounds.fields(line, "the line"))
    return {key.lower(): value for key, sep, value in pairs if sep}


def _line_files(line: str, node: str) -> list[str] | None:
    """The files one line gives `node`'s GPUs ([] when not about them), or None for a GPU line
    without files. Every GPU line is checked: slurmd reads the whole file on every node."""
    fields = _fields(line)
    if fields.get("name", "").lower() != "gpu":
        return []
    if "file" in fields:
        count(fields["file"])
    if "nodename" in fields and not names_node(fields["nodename"], node):
        return []
    return expand(fields["file"]) if "file" in fields else None


def gpu_files(text: str, node: str) -> list[str] | None:
    """The node's GPU device files in gres.conf order, or None when gres.conf names none."""
    files: list[str] = []
    for number, raw in bounds.lines(text, "gres.conf", max_len=MAX_LINE):
        try:
            found = _line_files(raw.split("#", 1)[0].strip(), node)
        except BadText as e:
            raise BadText(f"gres.conf line {number}: {e.message}") from None
        except Unsupported as e:
            raise Unsupported(f"gres.conf line {number}: {e}") from None
        if found is None:
            return None
        files += found
        if len(files) > MAX_EXPAND:
            raise BadText(f"gres.conf gives node {node!r} more than {MAX_EXPAND} GPU files")
    return files or None

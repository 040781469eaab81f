"""Which device files gres.conf gives a node's GPUs, in Slurm's index order. Pure.

Why: the doctor checks the host's GPU map (harness.config.gpumap) against what Slurm itself
hands out. A job sees only indexes (`SLURM_JOB_GPUS`); Slurm numbers a node's GPUs in the
order of their `File=` entries in gres.conf (`slurmd -G` lists them in that order; with
`File=/dev/dri/renderD128` listed first, the job given index 0 runs on renderD128).

Read here: lines `[NodeName=HOSTLIST] Name=gpu ... File=PATH` (a File may be a range such
as `/dev/dri/renderD[128-131]`), key names in any case, `#` comments. Not read: `Include`,
`AutoDetect` (then there are no files: the answer is None, and the doctor says so), and
hostlists of more than one bracket group in a name (`Unsupported`: Slurm reads them, this
check cannot compare them). The file is a site admin's, but a node must never trust it
further than a comparison: nothing read here reaches an argv, and every number and range
goes through harness.base.bounds, so text past a bound (a 5000-digit index, a range of 10^8
files, a reversed range, a NUL byte) is `BadText` with its line number, never an answer.
"""

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
    """How many names the hostlist `pattern` stands for, without expanding it; BadText
    past a bound (over `max_elements` in all), Unsupported beyond one bracket group."""
    total = sum(sum(map(len, spans)) if spans is not None else 1
                for _, spans, _ in _parts(pattern, max_elements))
    if total > max_elements:
        raise BadText(f"{bounds.shown(pattern)} stands for more than {max_elements} names")
    return total


def expand(pattern: str, max_elements: int = MAX_EXPAND) -> list[str]:
    """`node[1-3,7]` -> node1 node2 node3 node7; zero-padded ranges keep their width; a
    comma list outside brackets is split. Counted whole (`count`) before any expansion."""
    count(pattern, max_elements)
    out = []
    for head, spans, tail in _parts(pattern, max_elements):
        out += [head] if spans is None else [f"{head}{n}{tail}" for s in spans for n in s.names()]
    return out


def names_node(pattern: str, node: str) -> bool:
    """Whether the hostlist `pattern` names `node`: counted, never expanded, so a list may
    name a whole cluster (up to MAX_NODES a range)."""
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
    out = {}
    for word in bounds.fields(line, "the line"):
        key, sep, value = word.partition("=")
        if sep:
            out[key.lower()] = value
    return out


def _line_files(line: str, node: str) -> list[str] | None:
    """The files one line gives `node`'s GPUs ([] when it is not about them), or None for
    a GPU line of the node without files (auto-detected). Every GPU line's files are
    checked, whichever node it names: slurmd reads the whole file on every node."""
    fields = _fields(line)
    if fields.get("name", "").lower() != "gpu":
        return []
    if "file" in fields:
        count(fields["file"])
    if "nodename" in fields and not names_node(fields["nodename"], node):
        return []
    return expand(fields["file"]) if "file" in fields else None


def gpu_files(text: str, node: str) -> list[str] | None:
    """The node's GPU device files in gres.conf order, or None when gres.conf names none
    for it (auto-detection, or no line for this node). BadText (a line past a bound or
    not Slurm's syntax) and Unsupported say which line."""
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

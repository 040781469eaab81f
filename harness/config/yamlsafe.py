"""A YAML loader that keeps positions and refuses what a config file never needs.

Safe by construction: the node graph is walked by hand, so only the core scalar, sequence
and mapping tags are accepted (no tag ever builds an object), duplicate keys are errors,
and size, depth and alias expansion are bounded, so a "billion laughs" file fails fast.
Every value's position is kept, so schema errors can be reported as FILE:LINE:COL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1 << 20  # a campaign or control is a few KiB; 1 MiB is generous
MAX_NODES = 100_000  # counted with aliases expanded, so expansion bombs stop here
MAX_DEPTH = 64

Path_ = tuple[str | int, ...]

_SCALAR_TAGS = {
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp",
}
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


@dataclass(frozen=True)
class Fault:
    """One problem found in a file, GCC style."""

    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


@dataclass
class Document:
    """Plain data loaded from YAML plus where each value (and each key) stands."""

    file: str
    data: Any
    marks: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    key_marks: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def where(self, path: Path_, *, key: bool = False) -> tuple[int, int]:
        """The position of `path`, or of its nearest ancestor that has one."""
        path = tuple(path)
        while True:
            if key and path in self.key_marks:
                return self.key_marks[path]
            if path in self.marks:
                return self.marks[path]
            if not path:
                return (1, 1)
            path = path[:-1]

    def fault(self, path: Path_, message: str, *, key: bool = False) -> Fault:
        line, col = self.where(path, key=key)
        return Fault(self.file, line, col, message)


class YamlFaults(Exception):
    """Raised with every fault the loader found; the file is not usable."""

    def __init__(self, faults: list[Fault]):
        super().__init__("\n".join(map(str, faults)))
        self.faults = faults


def _pos(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    def __init__(self, file: str):
        self.doc = Document(file, None)
        self.nodes = 0
        self.scalar = yaml.SafeLoader("")  # only used for its scalar constructors

    def fail(self, node: yaml.Node, message: str) -> YamlFaults:
        line, col = _pos(node)
        return YamlFaults([Fault(self.doc.file, line, col, message)])

    def build(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(node, f"document too large: more than {MAX_NODES} values "
                                  "(counting alias expansion)")
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nesting deeper than {MAX_DEPTH} levels")
        self.doc.marks.setdefault(path, _pos(node))
        if isinstance(node, yaml.ScalarNode):
            if node.tag not in _SCALAR_TAGS:
                raise self.fail(node, f"tag {node.tag!r} is not allowed")
            if node.tag == "tag:yaml.org,2002:timestamp":
                return node.value  # keep dates as written; no datetime objects
            try:
                return self.scalar.construct_object(node, deep=True)
            except yaml.YAMLError as e:
                raise self.fail(node, f"bad scalar: {e}") from None
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                raise self.fail(node, f"tag {node.tag!r} is not allowed")
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                raise self.fail(node, f"tag {node.tag!r} is not allowed")
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise self.fail(key_node, "merge keys (<<) are not allowed")
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self.fail(key_node, "mapping keys must be plain strings")
                key = self.build(key_node, (*path, "<key>"), depth + 1)
                if not isinstance(key, str):
                    key = str(key)  # `1: x` or `yes: x`: a key is a name, keep its text
                if key in out:
                    first = self.doc.key_marks.get((*path, key), (0, 0))
                    raise self.fail(key_node, f"duplicate key {key!r} "
                                              f"(first at line {first[0]})")
                self.doc.key_marks[(*path, key)] = _pos(key_node)
                out[key] = self.build(value_node, (*path, key), depth + 1)
            return out
        raise self.fail(node, "unsupported YAML node")


def loads(text: str, file: str = "<string>") -> Document:
    """Parse one YAML document safely; raise YamlFaults with positions on any problem."""
    if len(text.encode("utf-8", errors="replace")) > MAX_BYTES:
        raise YamlFaults([Fault(file, 1, 1, f"file larger than {MAX_BYTES} bytes")])
    builder = _Builder(file)
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise YamlFaults([Fault(file, line, col, f"YAML syntax: {problem}")]) from None
    except yaml.YAMLError as e:
        raise YamlFaults([Fault(file, 1, 1, f"YAML: {e}")]) from None
    except RecursionError:
        raise YamlFaults([Fault(file, 1, 1, "nesting too deep")]) from None
    if node is None:
        builder.doc.data = None
        return builder.doc
    try:
        builder.doc.data = builder.build(node, (), 0)
    except RecursionError:
        raise YamlFaults([Fault(file, 1, 1, "nesting too deep")]) from None
    return builder.doc


def load(path: Path | str) -> Document:
    """Read and parse a YAML file; unreadable or non-UTF-8 files are faults too."""
    path = Path(path)
    name = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise YamlFaults([Fault(name, 1, 1, f"file larger than {MAX_BYTES} bytes")])
        raw = path.read_bytes()
    except OSError as e:
        raise YamlFaults([Fault(name, 1, 1, f"cannot read: {e.strerror or e}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlFaults([Fault(name, 1, 1, f"not UTF-8 text: {e.reason} at byte {e.start}")])\
            from None
    return loads(text, name)

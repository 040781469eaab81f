"""A YAML loader that keeps positions (FILE:LINE:COL) and refuses what a config never needs.

The node graph is walked by hand: only core tags, no duplicate keys, bounded size, depth
and aliases. YAML 1.1's surprising plain scalars (`1:30`, `017`, `on`, `1_000`, `.nan`, a
lone surrogate) are refused at their position, so no field can be switched off by one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.base.readfile import InputError, read_text_bounded

MAX_BYTES = 1 << 20  # a campaign or control is a few KiB; 1 MiB is generous
MAX_NODES = 100_000  # counted with aliases expanded, so expansion bombs stop here
MAX_DEPTH = 64
MAX_NUMBER_CHARS = 100  # no setting needs a longer number; Python refuses > 4300 digits

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


_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_OCTAL = re.compile(r"^[-+]?0[0-7]+$")
_PLAIN_BOOLS = {"true", "false", "True", "False", "TRUE", "FALSE"}


def yaml11_surprise(tag: str, text: str) -> str | None:
    """Why a number or boolean scalar would not mean what it looks like, or None.

    Pure: `tag` is the tag PyYAML resolved, `text` the scalar as written."""
    if tag in (_INT, _FLOAT):
        if len(text) > MAX_NUMBER_CHARS:
            return (f"number too long ({len(text)} characters; at most {MAX_NUMBER_CHARS})")
        if ":" in text:
            return (f"{text!r} is a YAML 1.1 base-60 number; quote it, or write a duration "
                    "as e.g. 90s or 30m")
        if "_" in text:
            return f"{text!r}: YAML versions disagree on '_' in numbers; write it without '_'"
        if tag == _INT and _OCTAL.match(text):
            return (f"{text!r} is a YAML 1.1 octal number ({int(text, 8)}); "
                    "drop the leading zero, or quote it for a string")
        if tag == _INT and text.lstrip("+-").lower().startswith("0b"):
            return f"{text!r} is a YAML 1.1 binary number; write it in decimal, or quote it"
    if tag == _BOOL and text not in _PLAIN_BOOLS:
        return (f"{text!r} is a YAML 1.1 boolean; write true or false, "
                "or quote it for a string")
    return None


def _bad_unicode(text: str) -> bool:
    return not text.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


class _TooDeep(yaml.MarkedYAMLError):
    """Raised by the scanner or composer itself, before it goes any deeper."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with the depth bound applied while scanning and composing:
    PyYAML recurses per level, and its scanner's work per token grows with the flow level,
    so `[[[[...` thousands deep must stop at level 65, not after the whole file."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner's cost grows with the flow level; stop it at the bound, exactly.
        if self.flow_level > MAX_DEPTH:
            raise _TooDeep(None, None, f"nesting deeper than {MAX_DEPTH} levels",
                           self.get_mark())
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 1:
                mark = self.peek_event().start_mark
                raise _TooDeep(None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Builder:
    def __init__(self, file: str):
        self.doc = Document(file, None)
        self.nodes = 0
        self.scalar = yaml.SafeLoader("")  # only used for its scalar constructors

    def fail(self, node: yaml.Node, message: str) -> YamlFaults:
        line, col = _pos(node)
        return YamlFaults([Fault(self.doc.file, line, col, message)])

    def count(self, node: yaml.Node, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(node, f"document too large: more than {MAX_NODES} values "
                                  "(counting alias expansion)")
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nesting deeper than {MAX_DEPTH} levels")

    def key(self, node: yaml.Node, path: Path_, depth: int) -> str:
        """A mapping key is a name: its text as written (`yes:` is "yes", `0001:` "0001")."""
        self.count(node, depth)
        self.doc.marks.setdefault(path, _pos(node))
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, "mapping keys must be plain strings")
        self.text(node)
        return node.value

    def text(self, node: yaml.ScalarNode) -> None:
        """A scalar's text: a core tag, valid Unicode, no NUL (no argv or path carries it)."""
        if node.tag not in _SCALAR_TAGS:
            raise self.fail(node, f"tag {node.tag!r} is not allowed")
        if _bad_unicode(node.value):
            raise self.fail(node, "not valid Unicode text (a lone surrogate such as \\ud800)")
        if "\x00" in node.value:
            raise self.fail(node, "contains a NUL character (\\0)")

    def scalar_value(self, node: yaml.ScalarNode) -> Any:
        self.text(node)
        if node.tag == "tag:yaml.org,2002:timestamp":
            return node.value  # keep dates as written; no datetime objects
        surprise = yaml11_surprise(node.tag, node.value)
        if surprise:
            raise self.fail(node, surprise)
        try:
            value = self.scalar.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError) as e:
            raise self.fail(node, f"bad scalar {node.value[:40]!r}: {e}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(node, f"{node.value!r} is not a finite number; no setting takes "
                                  "NaN or infinity (quote it for a string)")
        return value

    def build(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        self.count(node, depth)
        self.doc.marks.setdefault(path, _pos(node))
        if isinstance(node, yaml.ScalarNode):
            return self.scalar_value(node)
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
                key = self.key(key_node, (*path, "<key>"), depth + 1)
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
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except _TooDeep as e:
        mark = e.problem_mark
        raise YamlFaults([Fault(file, mark.line + 1, mark.column + 1, str(e.problem))]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise YamlFaults([Fault(file, line, col, f"YAML syntax: {problem}")]) from None
    except yaml.YAMLError as e:
        raise YamlFaults([Fault(file, 1, 1, f"YAML: {e}")]) from None
    except RecursionError:
        raise YamlFaults([Fault(file, 1, 1, "nesting too deep")]) from None
    except ValueError as e:  # the scanner's own, e.g. chr() of an escape past U+10FFFF
        line, col = (loader.line + 1, loader.column + 1) if loader else (1, 1)
        raise YamlFaults([Fault(file, line, col, f"YAML syntax: {e}")]) from None
    if node is None:
        builder.doc.data = None
        return builder.doc
    try:
        builder.doc.data = builder.build(node, (), 0)
    except RecursionError:
        raise YamlFaults([Fault(file, 1, 1, "nesting too deep")]) from None
    return builder.doc


def load(path: Path | str, what: str = "YAML file") -> Document:
    """Read (bounded, regular files only) and parse a YAML file; unreadable, special or
    non-UTF-8 files are faults at 1:1. A symlink is followed: these are the operator's own
    project files, never what a workload wrote."""
    name = str(path)
    try:
        text = read_text_bounded(path, MAX_BYTES, what, follow_symlinks=True)
    except InputError as e:
        why = e.message.removeprefix(f"{name}: ")
        if why.endswith("byte limit"):
            why = f"file larger than {MAX_BYTES} bytes ({why})"
        raise YamlFaults([Fault(name, 1, 1, why)]) from None
    return loads(text, name)

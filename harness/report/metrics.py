"""vLLM memory metrics read from a run's native log, for the run's `metrics.json`.

The native log is the evidence; these numbers are a convenience for the morning summary
and the trend plots, so the parser is strict about formats and honest about absence: a
metric whose line never appeared is `null`, never 0. Logs can be huge (tqdm bars, request
logs for hours), so files are streamed line by line with a cap on line length: memory
stays bounded whatever the file holds.

The format strings are vLLM's own (see tests/fixtures/vllm-logs/SOURCES.md). Lines may
carry any prefix, e.g. `(EngineCore pid=659) INFO 08-31 17:43:37 [core.py:NN]`, so each
pattern is searched anywhere in the line.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

SCHEMA = "harness.metrics/v1"
MAX_LINE_BYTES = 64 * 1024  # the lines we want are short; a longer line is cut, not buffered
CHUNK_BYTES = 256 * 1024
MAX_DISTINCT = 8  # distinct values kept per metric when a line repeats (TP workers, restarts)

METRICS = (
    "kv_cache_gib",
    "kv_tokens",
    "max_concurrency",
    "max_model_len",
    "model_load_gib",
    "model_load_s",
    "graph_capture_s",
    "graph_capture_gib",
    "engine_init_s",
    "compilation_s",
)
UNITS = {
    "kv_cache_gib": "GiB",
    "kv_tokens": "tokens",
    "max_concurrency": "x",
    "max_model_len": "tokens",
    "model_load_gib": "GiB",
    "model_load_s": "s",
    "graph_capture_s": "s",
    "graph_capture_gib": "GiB",
    "engine_init_s": "s",
    "compilation_s": "s",
}

_NUM = r"(-?\d+(?:\.\d+)?)"
_INT = r"(\d{1,3}(?:,\d{3})+|\d+)"


def _int(text: str) -> int:
    return int(text.replace(",", ""))


@dataclass(frozen=True)
class _Pattern:
    needle: str  # cheap substring test before the regex
    regex: re.Pattern[str]
    groups: tuple[tuple[str, int, Callable[[str], float | int]], ...]


_PATTERNS = (
    _Pattern(
        "KV cache memory",
        re.compile(r"Available KV cache memory: " + _NUM + r" GiB"),
        (("kv_cache_gib", 1, float),),
    ),
    _Pattern(
        "KV cache size",
        re.compile(r"\b(?:GPU|CPU|XPU) KV cache size: " + _INT + r" tokens"),
        (("kv_tokens", 1, _int),),
    ),
    _Pattern(
        "Maximum concurrency",
        re.compile(r"Maximum concurrency for " + _INT + r" tokens per request: " + _NUM + r"x"),
        (("max_model_len", 1, _int), ("max_concurrency", 2, float)),
    ),
    _Pattern(
        "Model loading took",
        re.compile(r"Model loading took " + _NUM + r" GiB memory and " + _NUM + r" seconds"),
        (("model_load_gib", 1, float), ("model_load_s", 2, float)),
    ),
    _Pattern(
        "Graph capturing finished",
        re.compile(r"Graph capturing finished in " + _NUM + r" secs(?:, took " + _NUM + r" GiB)?"),
        (("graph_capture_s", 1, float), ("graph_capture_gib", 2, float)),
    ),
    _Pattern(
        "init engine (",
        re.compile(
            r"init engine \(profile, create kv cache, warmup model\) took "
            + _NUM
            + r" s(?:econds)?\b(?: \(compilation: "
            + _NUM
            + r" s)?"
        ),
        (("engine_init_s", 1, float), ("compilation_s", 2, float)),
    ),
)


@dataclass
class MetricsParser:
    """Feed lines; the first occurrence of each metric wins, repeats are counted."""

    values: dict[str, float | int] = field(default_factory=dict)
    found_at: dict[str, str] = field(default_factory=dict)
    occurrences: dict[str, int] = field(default_factory=dict)
    distinct: dict[str, list[float | int]] = field(default_factory=dict)

    def feed(self, line: str, where: str = "") -> None:
        for pattern in _PATTERNS:
            if pattern.needle not in line:
                continue
            match = pattern.regex.search(line)
            if match is None:
                continue
            for name, group, convert in pattern.groups:
                raw = match.group(group)
                if raw is not None:
                    self._record(name, convert(raw), where)

    def _record(self, name: str, value: float | int, where: str) -> None:
        self.occurrences[name] = self.occurrences.get(name, 0) + 1
        seen = self.distinct.setdefault(name, [])
        if value not in seen and len(seen) < MAX_DISTINCT:
            seen.append(value)
        if name not in self.values:
            self.values[name] = value
            self.found_at[name] = where

    def metrics(self) -> dict[str, float | int | None]:
        """Every known metric, `None` where its line never appeared."""
        return {name: self.values.get(name) for name in METRICS}

    def conflicts(self) -> dict[str, list[float | int]]:
        """Metrics whose line appeared with different values (first value is the one used)."""
        return {k: v for k, v in sorted(self.distinct.items()) if len(v) > 1}


def parse_lines(lines: Iterable[str]) -> dict[str, float | int | None]:
    """The metrics in an iterable of log lines. Pure."""
    parser = MetricsParser()
    for number, line in enumerate(lines, 1):
        parser.feed(line, str(number))
    return parser.metrics()


def parse_text(text: str) -> dict[str, float | int | None]:
    return parse_lines(text.splitlines())


def iter_log_blocks(stream: BinaryIO, max_line: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Blocks of whole lines, `\r` folded to `\n` (tqdm redraws with `\r`).

    Each block ends in `\n`, except a last unterminated line at the end of the stream.
    Memory is bounded by CHUNK_BYTES + max_line: a line longer than `max_line` yields its
    first `max_line` bytes as a line and the rest is skipped up to the next line break.
    Works on whole chunks (find, count, slice once), never byte by byte.
    """
    tail = b""
    skipping = False
    while chunk := stream.read(CHUNK_BYTES):
        chunk = chunk.replace(b"\r", b"\n")
        if skipping:
            cut = chunk.find(b"\n")
            if cut < 0:
                continue
            chunk, skipping = chunk[cut + 1 :], False
        data = tail + chunk
        last = data.rfind(b"\n")
        if last >= 0:
            yield data[: last + 1]
            tail = data[last + 1 :]
        else:
            tail = data
        if len(tail) > max_line:
            yield tail[:max_line] + b"\n"
            tail, skipping = b"", True
    if tail and not skipping:
        yield tail


def iter_log_lines(stream: BinaryIO, max_line: int = MAX_LINE_BYTES) -> Iterator[str]:
    """Decoded lines of a binary stream, split at \\n and \\r, each cut to `max_line`."""
    for block in iter_log_blocks(stream, max_line):
        lines = block.split(b"\n")
        if block.endswith(b"\n"):
            lines.pop()
        for line in lines:
            yield line[:max_line].decode("utf-8", "replace")


_NEEDLES = tuple(p.needle.encode() for p in _PATTERNS)


def parse_file(path: Path, parser: MetricsParser | None = None, label: str = "") -> dict:
    """Stream one log file into `parser`; returns what was read (for the sources list).

    A block with none of the patterns' needles is only counted (so line numbers stay
    right); only blocks that may hold a metric are split and decoded.
    """
    parser = parser if parser is not None else MetricsParser()
    label = label or str(path)
    lines = 0
    with open(path, "rb") as f:
        for block in iter_log_blocks(f):
            n = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            if any(needle in block for needle in _NEEDLES):
                for i, line in enumerate(iter_log_lines(io.BytesIO(block)), lines + 1):
                    parser.feed(line, f"{label}:{i}")
            lines += n
    return {"path": label, "lines": lines, "bytes": Path(path).stat().st_size}


def write_metrics(log_paths: Sequence[Path], *, base: Path | None = None) -> dict:
    """The `metrics.json` document for a run, from its native logs in the order given.

    Returns the document; the caller writes it into the run folder (before SHA256SUMS).
    A missing log is listed as missing, not an error: the run's own verdict says whether
    a log should have been there. Paths are recorded relative to `base` (the run folder).
    """
    parser = MetricsParser()
    sources = []
    for path in log_paths:
        path = Path(path)
        inside = base is not None and path.is_relative_to(base)
        label = str(path.relative_to(base)) if inside else str(path)
        if not path.is_file():
            sources.append({"path": label, "missing": True})
            continue
        sources.append(parse_file(path, parser, label))
    return {
        "schema": SCHEMA,
        "metrics": parser.metrics(),
        "found_at": dict(sorted(parser.found_at.items())),
        "occurrences": dict(sorted(parser.occurrences.items())),
        "conflicts": parser.conflicts(),
        "sources": sources,
    }

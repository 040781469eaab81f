"""vLLM memory metrics parsed from real captured log lines (see fixtures SOURCES.md)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from harness.measure.metrics import (
    MAX_LINE_BYTES,
    METRICS,
    SCHEMA,
    MetricsParser,
    iter_log_lines,
    parse_file,
    parse_lines,
    write_metrics,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-logs"


def only(**kw: float | int | None) -> dict:
    return {name: kw.get(name) for name in METRICS}


def test_v0_13_enginecore_dp0_log() -> None:
    assert parse_lines((FIXTURES / "v0.13.0-enginecore-dp0.log").read_text().splitlines()) == only(
        kv_cache_gib=19.40, kv_tokens=211_936, max_model_len=8192, max_concurrency=25.87,
        model_load_gib=58.2299, model_load_s=199.672085, graph_capture_s=9.0,
        graph_capture_gib=0.66, engine_init_s=107.64,
    )


def test_enginecore_prefix_with_compilation_time() -> None:
    log = FIXTURES / "enginecore-compilation-spec-decode.log"
    got = parse_lines(log.read_text().splitlines())
    assert got == only(
        kv_cache_gib=66.37, kv_tokens=1_581_104, max_model_len=262_144, max_concurrency=21.86,
        model_load_gib=23.43, model_load_s=145.657922, graph_capture_s=1.0,
        graph_capture_gib=0.05, engine_init_s=158.68, compilation_s=71.54,
    )


def test_merged_kv_line_and_absent_metrics_are_none() -> None:
    got = parse_lines((FIXTURES / "cpu-merged-kv-line.log").read_text().splitlines())
    assert got == only(
        kv_cache_gib=1.0,  # `Explicitly set (1.0/31.28) GiB for KV cache on node 0.`
        kv_tokens=23_296, max_model_len=4096, max_concurrency=5.69, engine_init_s=0.28
    )
    assert got["model_load_gib"] is None and got["model_load_s"] is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("lmcache-1739-kv-lines.log",
         only(kv_cache_gib=6.51, kv_tokens=42_656, max_model_len=32_768, max_concurrency=1.30)),
        ("runai-67-no-prefix-seconds.log",
         only(kv_tokens=1_131_008, max_model_len=131_072, max_concurrency=8.63,
              graph_capture_s=37.0, graph_capture_gib=0.45, engine_init_s=90.84)),
        ("vllm-38820-worker-tp0.log", only(model_load_gib=12.66, model_load_s=31.657031)),
    ],
)
def test_issue_excerpts(name: str, expected: dict) -> None:
    assert parse_lines((FIXTURES / name).read_text().splitlines()) == expected


def test_notes_prefix_form() -> None:
    line = ("(EngineCore pid=659) INFO 08-31 17:43:37 [gpu_worker.py:440] "
            "Available KV cache memory: 3.5 GiB")
    assert parse_lines([line])["kv_cache_gib"] == 3.5


def test_lookalike_lines_are_not_metrics() -> None:
    lines = [
        "Estimated CUDA graph memory: -0.87 GiB total",
        "GPU KV cache usage: 2.1%, Prefix cache hit rate: 0.0%",
        "Loading weights took 24.84 seconds",
        "init engine took 70.62 s (compilation: 42.18 s)",  # paraphrase, not vLLM's format
        "Available KV cache memory: lots GiB",
    ]
    assert parse_lines(lines) == only()


def test_first_occurrence_wins_and_repeats_are_reported(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_text(
        "(Worker_TP0 pid=1) INFO Model loading took 7.5 GiB memory and 3.000000 seconds\n"
        "(Worker_TP1 pid=2) INFO Model loading took 7.6 GiB memory and 3.100000 seconds\n"
    )
    doc = write_metrics([log], base=tmp_path)
    assert doc["metrics"]["model_load_gib"] == 7.5
    assert doc["occurrences"]["model_load_gib"] == 2
    assert doc["conflicts"]["model_load_gib"] == [7.5, 7.6]
    assert doc["found_at"]["model_load_gib"] == "stdout.log:1"


def test_write_metrics_document_over_two_logs(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    out = tmp_path / "logs" / "stdout.log"
    out.write_bytes((FIXTURES / "v0.13.0-enginecore-dp0.log").read_bytes())
    doc = write_metrics([out, tmp_path / "logs" / "stderr.log"], base=tmp_path)
    assert doc["schema"] == SCHEMA
    assert set(doc["metrics"]) == set(METRICS)
    assert doc["metrics"]["kv_tokens"] == 211_936
    assert doc["sources"][0]["path"] == "logs/stdout.log"
    assert doc["sources"][0]["lines"] > 20
    assert doc["sources"][1] == {"path": "logs/stderr.log", "missing": True}
    assert doc["found_at"]["kv_tokens"].startswith("logs/stdout.log:")


def test_carriage_returns_split_tqdm_redraws() -> None:
    data = b"Capturing 1%\rCapturing 100%\rINFO Graph capturing finished in 9 secs, took 0.66 GiB\n"
    assert list(iter_log_lines(io.BytesIO(data)))[-1].endswith("took 0.66 GiB")


def test_huge_line_is_cut_and_following_lines_still_parsed() -> None:
    huge = b"x" * (5 * MAX_LINE_BYTES)
    data = huge + b"\nAvailable KV cache memory: 1.25 GiB\n"
    lines = list(iter_log_lines(io.BytesIO(data)))
    assert max(len(s) for s in lines) <= MAX_LINE_BYTES
    assert parse_lines(lines)["kv_cache_gib"] == 1.25


def test_big_file_streams(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    filler = b"(APIServer pid=1) INFO:     127.0.0.1 - \"POST /v1/completions HTTP/1.1\" 200 OK\n"
    with open(log, "wb") as f:
        f.write(b"(EngineCore pid=9) INFO [gpu_worker.py:1] Available KV cache memory: 2.00 GiB\n")
        for _ in range(20):
            f.write(filler * 5000)
        f.write(b"(EngineCore pid=9) INFO [core.py:1] init engine (profile, create kv cache, "
                b"warmup model) took 12.50 s\n")
    parser = MetricsParser()
    info = parse_file(log, parser)
    assert info["lines"] == 100_002
    assert parser.metrics()["engine_init_s"] == 12.5
    assert parser.metrics()["kv_cache_gib"] == 2.0


def test_invalid_utf8_does_not_crash() -> None:
    data = b"\xff\xfe garbage \x80\nGPU KV cache size: 1,024 tokens\n"
    assert parse_lines(iter_log_lines(io.BytesIO(data)))["kv_tokens"] == 1024

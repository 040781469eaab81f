"""Hostile content in logs, run folders and nights: metrics stay total, `show` and `report`
end in exit 0 or 2 with a message, never a traceback, a hang, or live markup (issue 10)."""

from __future__ import annotations

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.base.atomic import dumps_json
from harness.measure import metrics as metrics_module
from harness.measure.metrics import (
    MAX_NOTES,
    MAX_NUMBER_CHARS,
    METRICS,
    MetricsParser,
    parse_lines,
    write_metrics,
)
from harness.measure.nightfolder.journal import Journal
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.manifest import write_manifest
from harness.pipeline import evidence
from harness.pipeline.evidence import logfigures
from harness.pipeline.evidence.source import SEAL, Scene
from harness.readers.report.format import fmt
from harness.readers.report.page import render_html
from harness.readers.report.plots import render_plots
from harness.readers.report.summary import build_summary, render_markdown
from tests.inprocess import invoke

BIG_FLOAT = "9" * 400
BIG_INT = "7" * 5000
ESC = "\x1b[2J\x1b[31m"




def assert_clean(code: int, output: str, allowed: tuple[int, ...] = (0,)) -> None:
    assert code in allowed, (code, output[-2000:])
    assert "Traceback" not in output and "internal error" not in output, output[-2000:]


def no_nan(text: str) -> object:
    def refuse(token: str) -> None:
        raise AssertionError(f"non-finite {token} written")
    return json.loads(text, parse_constant=refuse)


# --- item 6: the metrics parser is total ------------------------------------------------

def test_over_long_numbers_are_null_with_a_note_and_dump_strictly() -> None:
    parser = MetricsParser()
    got = parse_lines([
        f"INFO Available KV cache memory: {BIG_FLOAT} GiB",
        f"INFO GPU KV cache size: {BIG_INT} tokens",
        f"Maximum concurrency for {BIG_INT} tokens per request: {BIG_FLOAT}x",
        f"Model loading took 1{'0' * MAX_NUMBER_CHARS}.5 GiB memory and 3.0 seconds",
    ], parser)
    assert got["kv_cache_gib"] is None and got["kv_tokens"] is None
    assert got["max_model_len"] is None and got["max_concurrency"] is None
    assert got["model_load_gib"] is None and got["model_load_s"] == 3.0
    noted = {(n["metric"], n["at"]) for n in parser.notes}
    assert {("kv_cache_gib", "1"), ("kv_tokens", "2"), ("max_model_len", "3"),
            ("max_concurrency", "3"), ("model_load_gib", "4")} <= noted
    assert all("character bound" in n["note"] for n in parser.notes)


def test_unparsed_first_line_does_not_block_a_later_good_one() -> None:
    parser = MetricsParser()
    got = parse_lines([f"Available KV cache memory: {BIG_FLOAT} GiB",
                       "Available KV cache memory: 2.5 GiB"], parser)
    assert got["kv_cache_gib"] == 2.5 and parser.occurrences["kv_cache_gib"] == 2


def test_non_ascii_digits_are_not_metrics() -> None:
    assert parse_lines(["Available KV cache memory: \u0661\u0662 GiB",
                        "GPU KV cache size: \uff11\uff12 tokens"]) == {
        k: None for k in parse_lines([])}


def test_metrics_document_of_a_hostile_log_is_strict_json(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    lines = [f"Available KV cache memory: {BIG_FLOAT} GiB", f"GPU KV cache size: {BIG_INT} tokens"]
    log.write_text("\n".join(lines * (MAX_NOTES + 5)) + "\n")
    doc = write_metrics([log], base=tmp_path)
    text = dumps_json(doc)  # allow_nan=False: an inf here would raise
    assert doc["metrics"]["kv_cache_gib"] is None and doc["metrics"]["kv_tokens"] is None
    # MAX_NOTES line notes, then one absence note per null metric, never dropped
    assert len([n for n in doc["notes"] if n["at"]]) == MAX_NOTES
    assert [n["metric"] for n in doc["notes"][MAX_NOTES:]] == list(METRICS)
    assert doc["notes"][MAX_NOTES]["note"] == (
        f"null: its {MAX_NOTES + 5} line(s) in the log held no usable number")
    assert doc["notes_dropped"] == 2 * (MAX_NOTES + 5) - MAX_NOTES
    assert doc["notes"][0] == {"metric": "kv_cache_gib", "at": "stdout.log:1",
                               "note": "a 400-character number, over the 32 character bound"}
    assert BIG_FLOAT not in text


def test_a_fifo_or_symlink_log_is_listed_not_followed_or_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "stdout.log")
    (tmp_path / "stderr.log").symlink_to("/etc/passwd")
    start = time.monotonic()
    doc = write_metrics([tmp_path / "stdout.log", tmp_path / "stderr.log",
                         tmp_path / "gone.log"], base=tmp_path)
    assert time.monotonic() - start < 5
    out, err, gone = doc["sources"]
    assert "not a regular file" in out["error"] and "error" in err
    assert gone == {"path": "gone.log", "missing": True}


def test_metrics_evidence_never_loses_the_verdict(tmp_path: Path, monkeypatch) -> None:
    """Even a bug in the parser leaves a metrics.json with a note, and no exception."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "stdout.log").write_text("hello\n")

    def broken(*a, **k):
        raise RuntimeError("parser bug")
    monkeypatch.setattr(metrics_module, "write_metrics", broken)
    events: list = []
    ctx = SimpleNamespace(run_dir=tmp_path, control=None, ui=SimpleNamespace(
        event=lambda kind, **kw: events.append(kind)))
    only = (logfigures.METRICS,)
    got = evidence.gather(SEAL, Scene(ctx), only)
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert got["metrics"].doc == doc and not got["metrics"].reasons
    assert set(doc["metrics"].values()) == {None}
    assert "RuntimeError: parser bug" in doc["notes"][0]["note"]
    evidence.gather(SEAL, Scene(ctx), only)  # metrics.json exists: only reported
    assert events == ["evidence-failed", "evidence-failed"]


# --- show -------------------------------------------------------------------------------

MARKUP = "[/…] [bold red]x[/] [/nope] [link=http://evil]y[/link] :smile:"


def run_folder(tmp_path: Path, record: object, name: str = "r1",
               files: dict[str, str] | None = None) -> Path:
    """A sealed run folder: show reads only a run its seal vouches for."""
    d = tmp_path / name
    d.mkdir()
    (d / "run.json").write_text(json.dumps(record) if not isinstance(record, str) else record)
    for rel, text in (files or {}).items():
        (d / rel).write_text(text)
    write_manifest(d)
    return d


def test_show_prints_markup_and_escapes_as_data(tmp_path: Path) -> None:
    rec = {"schema": run_record.SCHEMA, "run_id": "r1", "status": "accepted",
           "reasons": [MARKUP, ESC + "forged"],
           "campaign": {"name": "[/c]", "row": MARKUP + "\n  • accepted"},
           "control": {"name": "[red]c"}, "rerun_of": {"run_id": "r0[/b]", "reason": MARKUP},
           "post_steps": [{"name": "[/p]", "verdict": "[/v]", "exit_code": 0}]}
    d = run_folder(tmp_path, rec, files={"recovered.json": '{"note": "[/recovered]"}'})
    addendum = d / "addenda" / "[bold]a["
    addendum.mkdir(parents=True)
    (addendum / "note.txt").write_text("x")
    write_manifest(addendum)  # an addendum carries its own seal
    (tmp_path / "reruns.jsonl").write_text(
        "[" * 5000 + "\n" + json.dumps({"original": "r1", "rerun": {"run_id": "x"}}) + "\n"
        + json.dumps({"original": {"run_id": "r1"}, "rerun": {"run_id": "r2"},
                      "reason": "[/rerun reason]", "status": "accepted", "at": "t"}) + "\n")
    code, out = invoke("show", str(d))
    assert_clean(code, out)
    for needle in ("r0[/b]", "[/c]", "[/…] [bold red]x[/]", "[red]c", "[/p]", "[/v]",
                   "[/recovered]", "[/rerun reason]", "[bold]a[", ":smile:", "\\x1b[2J"):
        assert needle in out, needle
    assert "\x1b" not in out and "\\x0a  • accepted" in out


@pytest.mark.parametrize(("content", "message"), [
    ("[1, 2]", "a JSON list, not an object"),
    ('"accepted"', "a JSON str, not an object"),
    ("{" + '"a":' * 0 + '"a": ' + "[" * 3000 + "]" * 3000 + "}", "nested too deeply"),
    ('{"a": ' + "[" * 40 + "]" * 40 + "}", "nested deeper than"),
    ('{"n": ' + "9" * 5000 + "}", "not valid JSON"),
    ("{not json", "not valid JSON"),
])
def test_show_malformed_run_json_is_invalid_input(tmp_path: Path, content: str,
                                                  message: str) -> None:
    d = run_folder(tmp_path, content)
    for args in (("show", str(d)), ("show", "--json", str(d))):
        code, out = invoke(*args)
        assert_clean(code, out, (2,))
        assert message in out, out


def test_show_refuses_fifo_symlink_and_non_utf8_run_json(tmp_path: Path) -> None:
    """A FIFO or symlink run.json is never opened: planted after the seal it fails
    verification (exit 1), never sealed it is refused unsealed (exit 1); a sealed run.json
    that is not UTF-8 is bad input (exit 2). None of them hangs."""
    fifo = run_folder(tmp_path, "{}", "fifo")
    (fifo / "run.json").unlink()
    os.mkfifo(fifo / "run.json")
    link = run_folder(tmp_path, "{}", "link")
    (link / "run.json").unlink()
    (link / "run.json").symlink_to("/etc/passwd")
    unsealed = tmp_path / "unsealed"
    unsealed.mkdir()
    os.mkfifo(unsealed / "run.json")
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "run.json").write_bytes(b'{"run_id": "\xff"}')
    write_manifest(raw)
    start = time.monotonic()
    for d, code_wanted, messages in (
            (fifo, 1, ("[RUN-NOT-INTACT]", "run.json: not-regular (a fifo)")),
            (link, 1, ("[RUN-NOT-INTACT]", "run.json: not-regular (a symlink")),
            (unsealed, 1, ("[RUN-UNSEALED]", "never sealed")),
            (raw, 2, ("not valid JSON", "utf-8"))):
        code, out = invoke("show", str(d))
        assert_clean(code, out, (code_wanted,))
        for message in messages:
            assert message in out, out
    assert time.monotonic() - start < 10


def test_show_refuses_wrong_types_naming_each_fault(tmp_path: Path) -> None:
    """A run.json that parses but is not of a run record's shape is bad input (exit 2),
    every fault named, never a record printed as fact."""
    rec = {"run_id": ["x"], "status": {"evil": "[/s]"}, "campaign": "c", "control": 5,
           "lock": [1], "outcome": {"exit_code": {"a": 1}, "duration_s": "NaN"},
           "post_steps": {"name": "x"}, "reasons": "not a list", "rerun_of": 3,
           "image": {"id": "\ud800"}}
    d = run_folder(tmp_path, json.dumps(rec))
    code, out = invoke("show", str(d))
    assert_clean(code, out, (2,))
    assert "not a run record" in out
    for fault in ("schema is missing", "run_id has the wrong type (list)",
                  "status has the wrong type (dict)", "campaign has the wrong type (str)",
                  "control has the wrong type (int)", "reasons has the wrong type (str)",
                  "lock has the wrong type (list)", "post_steps has the wrong type (dict)",
                  "rerun_of has the wrong type (int)"):
        assert fault in out, fault
    assert "[/s]" not in out  # the record's values are not printed as fact


def test_show_refuses_well_typed_values_no_run_can_have(tmp_path: Path) -> None:
    rec = {"schema": run_record.SCHEMA, "run_id": "r1[/b]", "status": ESC + "[/s]",
           "campaign": {"row": "x"}, "control": {"name": "c"}, "attempt": 0,
           "post_steps": [{"verdict": "accepted"}], "stages": ["junk"]}
    d = run_folder(tmp_path, json.dumps(rec))
    for args in (("show", str(d)), ("show", "--json", str(d))):
        code, out = invoke(*args)
        assert_clean(code, out, (2,))
        for fault in ("run_id is not a run folder's name", "is not one of accepted",
                      "attempt is below 1", "campaign.name is missing",
                      "post_steps[0] has no name", "stages[0] is not an object"):
            assert fault in out, (fault, out)
        assert "\x1b" not in out  # the status is named escaped, never live


# --- report -----------------------------------------------------------------------------

def hostile_night(tmp_path: Path) -> Path:
    night = tmp_path / "nights" / "camp-20260101T000000Z"
    shaped = {"schema": run_record.SCHEMA, "campaign": {"name": "camp"}}
    records = {  # a record of the wrong shape is a problem of its run, never read as one
        "a-status-object": {**shaped, "run_id": "a", "status": {"x": 1}, "reasons": [MARKUP],
                            "control": {"name": "a"}},
        "b-mixed-times": {**shaped, "run_id": "b", "status": "accepted", "control": {"name": "b"},
                          "times": {"started": "2026-01-01T00:00:00",
                                    "ended": "2026-01-01T00:01:00+00:00"},
                          "lock": {"acquired": "2026-01-01T00:00:00Z",
                                   "released": "2026-01-01T00:00:30", "wait_s": "Infinity"}},
        "c-infinite": {**shaped, "run_id": "c", "status": "accepted", "control": {"name": "c"},
                       "lock": {"wait_s": 1e999}},
        "d-wrong-types": {"run_id": {"id": 1}, "status": ["refused"], "control": "x",
                          "reasons": 7, "post_steps": 5},
        "f-hostile-text": {**shaped, "run_id": "f", "status": "refused", "control": {"name": "f"},
                           "reasons": [ESC + "<script>alert(1)</script>", "[x](javascript:1)"],
                           "rerun_of": {"run_id": ["r"], "reason": "`code` | pipe"}},
    }
    metrics = {
        "a-status-object": '{"metrics": {"kv_cache_gib": Infinity, "kv_tokens": NaN}}',
        "b-mixed-times": '{"metrics": {"kv_cache_gib": 1e999, "kv_tokens": -Infinity}}',
        "c-infinite": '{"metrics": {"kv_tokens": ' + "9" * 4000 + "}}",
        "d-wrong-types": '{"metrics": ' + "[" * 5000 + "]" * 5000 + "}",
        "f-hostile-text": '{"metrics": {"kv_cache_gib": 1.5}}',
    }
    for name, rec in records.items():
        d = night / name
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps(rec).replace('"Infinity"', "Infinity"))
        (d / "metrics.json").write_text(metrics[name])
    deep = night / "e-deep"
    deep.mkdir()
    (deep / "run.json").write_text("[" * 5000 + "]" * 5000)
    return night


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_report_over_hostile_run_folders(tmp_path: Path, fmt: str) -> None:
    night = hostile_night(tmp_path)
    code, out = invoke("report", str(night), "--format", fmt)
    assert_clean(code, out)
    assert "\x1b" not in out
    if fmt != "json":  # JSON is data: markup in it is only text
        assert "<script>" not in out
    if fmt == "json":
        summary = no_nan(out)
        runs = {r["run_id"]: r for r in summary["runs"] if isinstance(r["run_id"], str)}

        def unread(folder: str) -> dict:  # a run whose run.json is not a record
            [entry] = [r for r in summary["runs"]
                       if any(f"{folder}/run.json: not a run record" in x for x in r["reasons"])]
            return entry
        bad_status = unread("a-status-object")
        assert bad_status["run_id"] is None and bad_status["status"] == "unknown"
        assert any("status has the wrong type (dict)" in r for r in bad_status["reasons"])
        assert set(bad_status["metrics"].values()) == {None}
        wrong = " ".join(unread("d-wrong-types")["reasons"])
        for fault in ("run_id has the wrong type (dict)", "status has the wrong type (list)",
                      "control has the wrong type (str)"):
            assert fault in wrong, fault
        assert "a" not in runs and "f" in runs
        assert runs["b"]["duration_s"] == 60.0 and runs["b"]["lock_hold_s"] == 30.0
        assert runs["b"]["lock_wait_s"] is None and runs["c"]["lock_wait_s"] is None
        assert runs["c"]["metrics"]["kv_tokens"] is None
        flat = json.dumps(summary)
        assert "nested too deeply" in flat
    if fmt == "md":
        assert "inf" not in out.lower().replace("info", "").replace("c-infinite", "")
        assert "\\[x\\](javascript:1)" in out and "\\`code\\` \\| pipe" in out


def test_summary_renders_every_value_escaped() -> None:
    rows = [{"id": 1, "control": "<b>c</b>", "state": "x`y", "reason": "[/r] <i>",
             "run_id": "id\u202e", "run_dir": "d`](http://x)"}]
    summary = build_summary({"name": "n<1>", "dir": "`x` <y>"}, [{"row": r} for r in rows])
    page = render_html(summary)
    assert "<b>c</b>" not in page and "<i>" not in page and "\u202e" not in page
    md = render_markdown(summary)
    assert "<b>" not in md and "\u202e" not in md and "`x`" not in md and "`](http" not in md
    assert "d\\`\\](http://x)" in md


def test_report_refuses_a_fifo_journal_quickly(tmp_path: Path) -> None:
    night = tmp_path / "camp-20260101T000000Z"
    night.mkdir()
    os.mkfifo(night / "journal.sqlite")
    start = time.monotonic()
    code, out = invoke("report", str(night))
    assert_clean(code, out, (2,))
    assert "not a regular file" in out and time.monotonic() - start < 10


def test_report_over_a_journal_row_with_hostile_values(tmp_path: Path) -> None:
    night = tmp_path / "nights" / "camp-20260101T000000Z"  # RUNS/nights/<night>, runs in RUNS
    night.mkdir(parents=True)
    j = Journal.create(night / "journal.sqlite", campaign="camp", campaign_file="c.yaml",
                       plan=[("kv", 0)], seal="sha256:" + "b" * 64)
    [row] = j.rows()
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(
        {"schema": run_record.SCHEMA, "run_id": "run-1", "status": "refused",
         "campaign": {"name": "camp"}, "control": {"name": "kv"},
         "times": {"started": "2026-01-01T00:00:00Z", "ended": "2026-01-01T00:00:05"}}))
    r = j.mark_running(row, "run-1", str(run))
    j.finish(r, "refused", ESC + "[/x] | <b>")
    j.close()
    for form in ("md", "html", "json"):
        code, out = invoke("report", str(night), "--format", form)
        assert_clean(code, out)
        assert "\x1b" not in out and (form == "json" or "<b>" not in out)
    assert re.search(r"5\.0 s", invoke("report", str(night))[1])


@pytest.mark.parametrize("points", [
    [("a", 9007199254740996.0)],  # lo - 1 == lo: a zero span divided by
    [("a", 1.7e308), ("b", -1.7e308)],  # hi - lo overflows to inf
    [("a", 5e-324), ("b", 0.0)],
    [("a", float("inf")), ("b", float("nan")), ("c", 10**400), ("d", True), ("e", "7")],
])
def test_plots_survive_extreme_values(points: list) -> None:
    from harness.measure.perflog import number

    trends = {"c": [{"kv_cache_gib": number(v), "status": "accepted"} for _, v in points]}
    plots = render_plots([n for n, _ in points], trends, [("kv_cache_gib", "KV", "GiB")])
    for _, svg in plots:
        ET.fromstring(svg)


def test_fmt_never_prints_a_non_finite_figure() -> None:
    assert fmt(float("inf"), "GiB") == fmt(float("nan")) == fmt(10**400) == "—"

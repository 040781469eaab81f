"""Every string a night's evidence holds, in every form the harness shows it: a control name,
a reason, a telemetry source or a night folder's name chosen by an attacker reaches no
terminal as a control sequence, no rich markup or emoji code is read in it, and JSON stays
strict, encodable JSON."""

from __future__ import annotations

import io
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.cli.display import NightLive
from harness.measure.runfolder import runjson as run_record
from harness.measure.telemetry.quantities import number
from harness.measure.ui import TerminalReporter
from harness.readers.report.morning import FORMATS, render
from harness.readers.report.summary import build_summary, trend_points
from tests.inprocess import invoke
from tests.unit.test_hostile_reports import run_folder
from tests.unit.test_summary_report import make_night

# OSC 8 hyperlink, a title, C1 CSI, bidi overrides, rich markup and an emoji code, Markdown
# and HTML, a lone surrogate, line breaks
HOSTILE = ("\x1b]8;;http://evil.example/\x07L\x1b]8;;\x07\x1b]0;T\x07\x9b31m\u202e\u2066"
           "[red]R[/red][link=http://x]k[/link]:white_check_mark:|<b>x</b>\"'`"
           "![i](http://t.example/p.png)\ud800\n#&amp;\u0085\u2028")
LIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029"
                  "\u2066-\u2069\ud800-\udfff]")
NIGHT = "20261129T020000Z"


def h(text: str) -> str:
    return text + HOSTILE


def records() -> list[dict]:
    """A night's records with every string the summary reads hostile."""
    out = []
    for i, status in enumerate(("accepted", "refused", "failed", "planned")):
        run = None if status == "planned" else {
            "schema": "harness.run/v1", "run_id": h(f"r{i}"), "status": status,
            "reasons": [h("reason"), {"rule": h("RULE"), "text": h("t")}],
            "campaign": {"name": h("camp")}, "control": {"name": h("c")},
            "times": {"started": h("s"), "sealed": h("se")},
            "rerun_of": {"run_id": h("orig"), "reason": h("why")},
            "post_steps": [{"name": h("p"), "verdict": h("v"), "exit_code": 1}]}
        out.append({
            "row": {"id": i, "plan_index": i, "control": h("c"), "repeat_index": 0,
                    "attempt": 1, "state": status, "run_id": h(f"r{i}"),
                    "run_dir": h(f"/d{i}"), "reason": h("journal"), "rerun_of": None,
                    "origin": "plan", "link_reason": h("link"), "updated": h("u")},
            "run": run, "metrics": {"metrics": {"kv_cache_gib": 1.5}}, "problems": [h("p")],
            "reference": {"findings": {h("kv_cache_gib"): {"lower": 1, "upper": 2,
                                                           "outside": True}}},
            "path": h(f"/p{i}"),
            "gate0": [{"field": h("f"), "processes": [h("a"), h("b")], "startup": h("s"),
                       "generation": h("g")}],
            "regression": {"control": h("c"), "run_id": h("r0"), "regressions": [h("fig")],
                           "figures": {}, "rerun": {"why": h("why")}, "skipped": {h("k"): 2},
                           "stopped": h("stop")} if i == 0 else None,
            "telemetry": {h("gpu"): {"power_w": [[0, 100], [1, 120]]}},
            "kernel": [{"rule": h("K"), "count": 1, "lines": [h("line")]}]})
    return out


def strings(value: Any) -> list[str]:
    """Every string in a JSON-like value, its mappings' keys too."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def test_every_string_of_a_hostile_nights_summary_is_inert() -> None:
    """The summary is the one place each string is made inert: its telemetry sources and
    the nights of its trends too, so every format drawn from it (and summary.json, shown by
    `show --json` and read by the hook) carries none live."""
    recs = records()
    trends = trend_points([(h("night1"), recs), (h("night2"), recs)])
    night = {k: h(k) for k in ("name", "dir", "campaign", "campaign_file", "seal", "created")}
    summary = build_summary(night, recs, trends, {h("r1"): h("r0")})
    live = [s for s in strings(summary) if LIVE.search(s)]
    assert not live, live[:3]
    for fmt in FORMATS:
        text = render(summary, fmt)
        assert not LIVE.search(text.replace("\n", "")), fmt
        text.encode("utf-8")  # a lone surrogate could not be written to a file
    json.loads(render(summary, "json"), parse_constant=lambda c: pytest.fail(c))


def _hostile_telemetry(runs: Path) -> None:
    folder = runs / f"rehearsal-kv-fixed-{NIGHT}-0001"
    (folder / "telemetry.jsonl").write_text("".join(
        json.dumps({"t": t, "unix": t + 1, "figures": {h("gpu"): {"power_w": 100 + t}}}) + "\n"
        for t in range(2)))


def test_report_writes_json_for_a_hostile_telemetry_source(tmp_path: Path) -> None:
    runs = tmp_path / "gpu-runs"
    night = make_night(runs, NIGHT, "enginecore-compilation-spec-decode.log")
    _hostile_telemetry(runs)
    out = tmp_path / "s.json"
    code, said = invoke("report", str(night), "--format", "json", "-o", str(out))
    assert code == 0, said
    text = out.read_text(encoding="utf-8")
    assert not LIVE.search(text) and "\\\\x9b31m" in text
    code, said = invoke("show", "--json", str(night))
    assert code == 0 and not LIVE.search(said.replace("\n", "")), said[-500:]


def test_a_figure_no_float_holds_is_no_figure_and_the_report_goes_on(tmp_path: Path) -> None:
    """JSON allows an integer of any length: a workload's 400-digit power reading is not a
    number to plot (math.isfinite would overflow on it), and never an internal error."""
    runs = tmp_path / "gpu-runs"
    night = make_night(runs, NIGHT, "enginecore-compilation-spec-decode.log")
    folder = runs / f"rehearsal-kv-fixed-{NIGHT}-0001"
    (folder / "telemetry.jsonl").write_text("".join(
        f'{{"t": {t}, "unix": {t + 1}, "figures": {{"gpu": {{"power_w": 1{"0" * 400}}}}}}}\n'
        for t in range(2)))
    assert not number(10 ** 400) and number(10 ** 300) and not number(True)
    for fmt in ("json", "md", "html"):
        code, said = invoke("report", str(night), "--format", fmt, "-o", str(tmp_path / fmt))
        assert code == 0, said


def test_report_of_a_night_folder_named_anything_is_inert(tmp_path: Path) -> None:
    """A night folder given by path (from a bundle, say) may be named with any bytes: its
    name is a trend's night too, and JSON must still be written as UTF-8."""
    night = make_night(tmp_path / "gpu-runs", NIGHT, "enginecore-compilation-spec-decode.log")
    odd = Path(os.fsdecode(os.fsencode(night.parent) + b"/n\xff\xc2\x9b\xe2\x80\xae"))
    night.rename(odd)
    for fmt in ("json", "md", "html"):
        out = tmp_path / f"s.{fmt}"
        code, said = invoke("report", str(odd), "--format", fmt, "-o", str(out))
        assert code == 0, said
        assert not LIVE.search(out.read_text(encoding="utf-8").replace("\n", "")), fmt


def test_event_lines_read_no_markup_and_no_emoji_code() -> None:
    """A night's event lines carry control names and reasons from campaigns and run folders:
    rich must print them as they are, never turn `:white_check_mark:` into a tick or
    `[link=…]` into a live hyperlink."""
    ui = TerminalReporter()
    out = io.StringIO()
    ui.console = Console(file=out, force_terminal=True, width=300)
    ui.event("sealed", run_id="r1", status="refused", dir="d",
             reasons=[":white_check_mark: [link=http://evil.example]fine[/link]"])
    text = out.getvalue()
    assert ":white_check_mark: [link=http://evil.example]fine[/link]" in text
    assert "\u2705" not in text and "\x1b]8" not in text


def test_the_live_night_panel_reads_no_markup_and_no_emoji_code() -> None:
    live = NightLive.__new__(NightLive)  # without starting rich's Live thread
    buf = io.StringIO()
    live.console = Console(file=buf, force_terminal=True, width=200)
    live.campaign, live.t0, live.done, live.total = ":skull: camp", time.monotonic(), 0, 2
    live.fields = {"night": "-", "control": "-", "lock": "-", "run": "-"}
    live.event("control-start", control=":white_check_mark: [link=http://evil.example]c", attempt=1)
    live.console.print(live._render())
    text = buf.getvalue()
    assert text.count(":white_check_mark: [link=http://evil.example]c") == 2
    assert ":skull: camp" in text
    assert "\u2705" not in text and "\U0001f480" not in text and "\x1b]8" not in text


def test_the_pages_show_command_keeps_a_hostile_path_one_argument() -> None:
    """The page offers `harness show PATH` to copy: a run folder named `x; touch pwned`
    must stay one argument, as the report's rerun and diff commands do."""
    path = "/runs/x; touch pwned $(id)"
    record = {"row": {"id": 0, "plan_index": 0, "control": "c", "attempt": 1,
                      "state": "accepted", "run_id": "r"},
              "run": {"run_id": "r", "status": "accepted"}, "path": path}
    page = render(build_summary({"name": "n", "dir": "/runs/nights/n"}, [record]), "html")
    assert "harness show &#x27;/runs/x; touch pwned $(id)&#x27;</code>" in page


def test_show_json_of_a_record_json_cannot_carry_is_refused_not_printed(tmp_path: Path) -> None:
    """Python's reader lets NaN and Infinity into a sealed run.json; printed, they would be
    JSON no other reader takes. Other hostile text stays ASCII escapes, never raw."""
    record = {"schema": run_record.SCHEMA, "run_id": "r1", "status": "accepted",
              "campaign": {"name": "c"}, "control": {"name": "k"}, "note": HOSTILE}
    code, out = invoke("show", "--json", str(run_folder(tmp_path, record)))
    assert code == 0 and json.loads(out)["note"] == HOSTILE and not LIVE.search(
        out.replace("\n", ""))
    nan = run_folder(tmp_path, json.dumps({**record, "outcome": {"duration_s": float("nan")}}),
                     "r2")
    code, out = invoke("show", "--json", str(nan))
    assert code == 2 and "NaN or Infinity" in out and "NaN," not in out, out

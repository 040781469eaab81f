"""The morning summary: JSON, Markdown, self-contained HTML with valid inline SVG, and the CLI."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from harness.base.errors import InvalidInput
from harness.cli.report import report
from harness.measure.metrics import write_metrics
from harness.measure.nightfolder.journal import Journal
from harness.readers.report.morning import summary_for_campaign, write_night_summary
from harness.readers.report.page import render_html
from harness.readers.report.plots import render_plots, y_limits
from harness.readers.report.summary import build_summary, render_markdown, trend_points

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-logs"
EVIL = 'finalizer said <script>alert("x")</script> | & done'


class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def run_json(run_id: str, control: str, status: str, reasons: list[str], **extra) -> dict:
    return {
        "schema": "harness.run/v1", "run_id": run_id,
        "campaign": {"name": "rehearsal-night", "file": "campaigns/rehearsal-night.yaml",
                     "row": "R"},
        "control": {"name": control, "file": f"controls/{control}.yaml"},
        "status": status, "reasons": reasons,
        "times": {"created": "2026-11-30T08:30:00Z", "started": "2026-11-30T08:30:05.500000Z",
                  "ended": "2026-11-30T08:37:15.500000Z"},
        "lock": {"path": "/home/op/gpu.lock", "acquired": "2026-11-30T08:30:02Z",
                 "released": "2026-11-30T08:37:20Z", "wait_s": 2.25},
        "post_steps": [{"name": "profile-gate", "exit_code": 1 if status == "refused" else 0,
                        "verdict": status}],
        "rerun_of": None, **extra,
    }


def make_night(runs: Path, stamp: str, log: str, *, refuse_second: bool = True) -> Path:
    night = runs / "nights" / f"rehearsal-night-{stamp}"
    night.mkdir(parents=True)
    j = Journal.create(night / "journal.sqlite", campaign="rehearsal-night",
                       campaign_file="campaigns/rehearsal-night.yaml",
                       plan=[("kv-auto", 0), ("kv-fixed", 0), ("echo", 0)],
                       seal="sha256:" + "b" * 64)
    rows = j.rows()
    for row, status in zip(rows[:2], ["accepted", "refused" if refuse_second else "accepted"],
                           strict=True):
        run_id = f"rehearsal-{row.control}-{stamp}-0001"
        folder = runs / run_id
        (folder / "logs").mkdir(parents=True)
        (folder / "logs" / "stdout.log").write_bytes((FIXTURES / log).read_bytes())
        reasons = [EVIL] if status == "refused" else []
        (folder / "run.json").write_text(json.dumps(run_json(run_id, row.control, status, reasons)))
        doc = write_metrics([folder / "logs" / "stdout.log"], base=folder)
        (folder / "metrics.json").write_text(json.dumps(doc))
        r = j.mark_running(row, run_id, run_id)  # relative to the runs dir
        j.finish(r, status, "" if status == "accepted" else "finalizer exited 1")
    j.mark_deferred(rows[2], "doctor: /dev/kfd missing")
    j.close()
    return night


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    runs = tmp_path / "gpu-runs"
    make_night(runs, "20261128T020000Z", "lmcache-1739-kv-lines.log", refuse_second=False)
    make_night(runs, "20261129T020000Z", "enginecore-compilation-spec-decode.log")
    return runs


def test_json_summary_values(runs: Path) -> None:
    night = runs / "nights" / "rehearsal-night-20261129T020000Z"
    write_night_summary(night)
    summary = json.loads((night / "summary.json").read_text())
    by_control = {r["control"]: r for r in summary["runs"]}
    assert summary["counts"] == {"accepted": 1, "deferred": 1, "refused": 1}
    kv = by_control["kv-auto"]
    assert kv["metrics"]["kv_cache_gib"] == 66.37 and kv["metrics"]["kv_tokens"] == 1_581_104
    assert kv["lock_wait_s"] == 2.25 and kv["lock_hold_s"] == 438.0 and kv["duration_s"] == 430.0
    assert EVIL in by_control["kv-fixed"]["reasons"]
    assert "finalizer exited 1" in by_control["kv-fixed"]["reasons"]
    assert by_control["echo"]["reasons"] == ["doctor: /dev/kfd missing"]
    trend = summary["trends"]["kv-auto"]
    assert [name for name, _ in trend] == ["rehearsal-night-20261128T020000Z",
                                           "rehearsal-night-20261129T020000Z"]
    assert [values["kv_cache_gib"] for _, values in trend] == [6.51, 66.37]


def test_html_is_self_contained_escaped_and_has_values(runs: Path) -> None:
    night = runs / "nights" / "rehearsal-night-20261129T020000Z"
    write_night_summary(night)
    page = (night / "summary.html").read_text()
    parser = Collector()
    parser.feed(page)
    text = " ".join(parser.text)
    for needle in ("kv-auto", "kv-fixed", "refused", "accepted", "deferred", "66.37 GiB",
                   "1,581,104 tokens", "2.2 s", "7m18s", "doctor: /dev/kfd missing", EVIL):
        assert needle in text, needle
    assert "script" not in parser.tags  # the evil reason stayed text
    assert "<script>" not in page
    assert not [v for k, v in parser.attrs if k == "src"]  # no external assets
    hrefs = [v for k, v in parser.attrs if k == "href"]
    assert hrefs and all(h.startswith("../../rehearsal-") for h in hrefs)  # the run folders
    targets = [(night / unquote(h)).resolve() for h in hrefs]
    assert all(t.is_relative_to(runs.resolve()) for t in targets)
    # two runs: folder, run.json, stdout.log each exist (the fixture writes no stderr.log)
    assert sum(t.exists() for t in targets) == 6 and len(targets) == 8
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(svgs) >= 4  # status, duration, lock wait, and the vLLM figures that have values
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # several inline SVGs: no id may repeat
    for svg in svgs:
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_markdown_table_escapes_pipes(runs: Path) -> None:
    night = runs / "nights" / "rehearsal-night-20261129T020000Z"
    write_night_summary(night)
    md = (night / "summary.md").read_text()
    assert "| 1 | kv-auto | 1 | **accepted** |" in md  # rows numbered from 1
    refused = next(line for line in md.splitlines() if "kv-fixed" in line and "**refused**" in line)
    assert "\\|" in refused  # the reason's pipe does not split the table
    header = next(line for line in md.splitlines() if line.startswith("| #"))
    cells = re.compile(r"(?<!\\)\|")
    assert len(cells.split(refused)) == len(cells.split(header))
    assert "<script>" not in md  # raw HTML would be live in many Markdown renderers
    assert "## Across nights" in md


def test_cli_report_night_dir_and_campaign(runs: Path, tmp_path: Path) -> None:
    campaign = tmp_path / "rehearsal-night.yaml"
    campaign.write_text("name: rehearsal-night\nrow: R\ncontrols: [kv-auto]\n")
    cli = CliRunner()
    night = runs / "nights" / "rehearsal-night-20261128T020000Z"
    out = cli.invoke(report, [str(night), "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["night"]["name"] == night.name
    out = cli.invoke(report, [str(campaign), "--runs-dir", str(runs), "--format", "md"])
    assert out.exit_code == 0, out.output
    assert "# Night rehearsal-night-20261129T020000Z" in out.output  # the latest
    out = cli.invoke(report, [str(campaign), "--runs-dir", str(runs), "--format", "html"])
    assert out.output.startswith("<!DOCTYPE html>")


def test_campaign_without_nights_is_invalid_input(tmp_path: Path) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: lonely\nrow: R\ncontrols: [x]\n")
    with pytest.raises(InvalidInput, match="no nights of campaign 'lonely'"):
        summary_for_campaign(campaign, tmp_path)


def test_missing_run_folder_and_bad_run_json_are_reported_not_raised(runs: Path) -> None:
    night = runs / "nights" / "rehearsal-night-20261129T020000Z"
    run_dirs = sorted(p for p in runs.iterdir() if p.name.endswith("20261129T020000Z-0001"))
    (run_dirs[0] / "run.json").write_text("{not json")
    for p in run_dirs[1].iterdir():
        if p.is_file():
            p.unlink()
    run_dirs[1].joinpath("logs", "stdout.log").unlink()
    run_dirs[1].joinpath("logs").rmdir()
    run_dirs[1].rmdir()
    write_night_summary(night)
    reasons = [r["reasons"] for r in json.loads((night / "summary.json").read_text())["runs"]]
    flat = " ".join(" ".join(r) for r in reasons)
    assert "run.json unreadable" in flat and "not found" in flat


def test_corrupt_journal_in_night_is_a_clear_error(tmp_path: Path) -> None:
    night = tmp_path / "n"
    night.mkdir()
    (night / "journal.sqlite").write_bytes(b"garbage" * 200)
    out = CliRunner().invoke(report, [str(night)])
    assert out.exit_code != 0
    assert "damaged" in str(out.exception)
    assert (night / "journal.sqlite").read_bytes() == b"garbage" * 200


def test_rerun_link_shown_both_ways() -> None:
    rows = [
        {"id": 1, "plan_index": 0, "control": "kv", "attempt": 1, "state": "refused",
         "run_id": "a", "rerun_of": None, "reason": "refused"},
        {"id": 2, "plan_index": 0, "control": "kv", "attempt": 2, "state": "accepted",
         "run_id": "b", "rerun_of": 1, "link_reason": "instrument repaired"},
    ]
    summary = build_summary({"name": "n"}, [{"row": r} for r in rows])
    assert summary["runs"][0]["reruns"] == ["b"]
    assert summary["runs"][1]["rerun_of"] == "a"
    md = render_markdown(summary)
    assert "rerun of a (instrument repaired)" in md and "rerun as b" in md
    assert "rerun as b" in render_html(summary)


def test_plots_are_valid_svg_with_gaps_markers_and_escaping() -> None:
    trends = {"a<&>": [{"duration_s": 1.0, "status": "accepted", "exit_code": 0}, {},
                       {"duration_s": 3.5, "status": "refused", "exit_code": 3}],
              "b": [{"duration_s": 2.0, "status": "accepted"}, {"status": "failed"}, {}]}
    plots = render_plots(["n1", "n<2>", "n3"], trends, [("duration_s", "duration", "s"),
                                                        ("kv_cache_gib", "KV", "GiB")])
    assert [t for t, _ in plots] == ["status per night", "duration"]  # KV: no values
    for _, svg in plots:
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    status, duration = plots[0][1], plots[1][1]

    def texts(svg: str) -> list[str]:  # labels are SVG text: the escaped name reads back
        return [t.text or "" for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]

    assert {"exit 3", "refused", "a<&>", "n<2>", "night (UTC start)"} <= set(texts(status))
    assert "exit 0" not in texts(status)  # only runs that did not exit 0 are labelled
    assert 'aria-label="duration"' in duration
    assert {"duration (1–3.5 s, spread 71 %)", "duration (s)", "not accepted", "a<&>", "b"} \
        <= set(texts(duration))  # title with its spread, y label, legend
    assert render_plots([], {}, []) == []


def test_y_range_shows_the_spread_and_never_invents_one() -> None:
    lo, hi = y_limits([10.0, 10.00002])  # a 2 ppm change stays flat: the axis starts at 0
    assert lo == 0 and hi > 10.00002 and (10.00002 - 10.0) / (hi - lo) < 1e-5
    lo, hi = y_limits([1.0, 2.0])
    assert lo == 0 and 2.0 < hi < 2.5  # a doubling doubles
    lo, hi = y_limits([-3.0, 1.0])
    assert lo < -3.0 and hi > 1.0 and hi - lo < 6


def test_trend_points_align_nights_and_pick_newest_attempt() -> None:
    def rec(control: str, attempt: int, kv: float) -> dict:
        return {"row": {"control": control, "attempt": attempt}, "metrics": {"kv_cache_gib": kv}}
    nights = [("n1", [rec("a", 1, 1.0), rec("a", 2, 2.0)]), ("n2", [rec("b", 1, 5.0)])]
    trends = trend_points(nights)
    assert [(n, v.get("kv_cache_gib")) for n, v in trends["a"]] == [("n1", 2.0), ("n2", None)]
    assert [(n, v.get("kv_cache_gib")) for n, v in trends["b"]] == [("n1", None), ("n2", 5.0)]


def test_a_relative_run_folder_in_a_journal_is_found_from_the_night_not_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal row's run_dir (relative: a night started with a relative --runs-dir from
    the project folder; or a hostile `../`) is read by its name beside the night's runs
    dir, from whatever folder, never where the written path leads."""
    from harness.measure.nightfolder.naming import run_beside

    night = tmp_path / "proj" / "runs" / "nights" / "n1"
    night.mkdir(parents=True)
    (tmp_path / "proj" / "runs" / "r1").mkdir()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "runs" / "r2").mkdir(parents=True)  # the current folder's: no say
    monkeypatch.chdir(elsewhere)
    assert run_beside(night, "runs/r1") == tmp_path / "proj" / "runs" / "r1"
    assert run_beside(night, "r1") == tmp_path / "proj" / "runs" / "r1"
    assert run_beside(night, "runs/r2") is None
    assert run_beside(night, f"{elsewhere}/runs/r2") is None  # the written path: not opened


def test_the_slots_a_stopped_night_left_are_named_with_why_until_they_run(tmp_path: Path,
                                                                          ) -> None:
    """A night stopped by its policy leaves its planned rows with why: summary.json,
    summary.md, summary.html, every `report` format and the end lines name each (its
    repeat where the control repeats); once a later start runs one, it is gone."""
    from harness.readers.report.ending import night_end_lines
    from harness.readers.report.morning import render, summary_for_night

    night = tmp_path / "runs" / "nights" / "c-20261129T020000Z"
    night.mkdir(parents=True)
    j = Journal.create(night / "journal.sqlite", campaign="c", campaign_file="c.yaml",
                       plan=[("a", 0), ("b", 0), ("b", 1)], seal="sha256:" + "b" * 64)
    a, b0, b1 = j.rows()
    j.finish(j.mark_running(a, "a-1", "/nowhere/a-1"), "refused", "GATE0-FIELD-DIFFERS: x")
    why = "stop_policy stop-on-refusal after a was refused (GATE0-FIELD-DIFFERS)"
    j.leave(b0, why)
    j.leave(b1, why)
    j.close()
    written = write_night_summary(night)
    doc = json.loads((night / "summary.json").read_text())
    assert [(e["label"], e["why"]) for e in doc["not_executed"]] == [
        ("b (repeat 1)", why), ("b (repeat 2)", why)]
    assert doc["not_executed"][1]["repeat_index"] == 1
    md = (night / "summary.md").read_text()
    assert "## Not executed" in md and "- b (repeat 2): stop\\_policy stop-on-refusal" in md
    assert "<h2>Not executed</h2>" in (night / "summary.html").read_text()
    assert f"<li>b (repeat 1): {why}</li>" in (night / "summary.html").read_text()
    summary = summary_for_night(night)
    assert f"  b (repeat 1): {why}" in render(summary, "table", 200)
    assert json.loads(render(summary, "json"))["not_executed"] == doc["not_executed"]
    lines = night_end_lines(night, written)
    assert [x for x in lines if x.startswith("not executed")] == [
        f"not executed: b (repeat 1): {why}", f"not executed: b (repeat 2): {why}"]

    with Journal.open(night / "journal.sqlite") as j:  # resumed: the first b runs
        j.finish(j.mark_running(j.rows()[1], "b-1", "/nowhere/b-1"), "accepted")
    write_night_summary(night)
    doc = json.loads((night / "summary.json").read_text())
    assert [e["label"] for e in doc["not_executed"]] == ["b (repeat 2)"]


def test_a_night_that_left_nothing_names_nothing(runs: Path) -> None:
    night = runs / "nights" / "rehearsal-night-20261129T020000Z"
    write_night_summary(night)
    assert json.loads((night / "summary.json").read_text())["not_executed"] == []
    assert "Not executed" not in (night / "summary.md").read_text()

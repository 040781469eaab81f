"""The report's history of earlier nights (their trends) and the one reader of summary.json."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.cli.diff import read_night
from harness.readers.hook.payload import SummaryUnreadable, read_summary
from harness.readers.report import ending
from harness.readers.report.morning import summary_for_campaign, write_night_summary
from harness.readers.report.nights import load_night
from harness.readers.statuslines import headline_of
from tests.unit.test_summary_report import make_night

CAMPAIGN = Path(__file__).resolve().parents[2] / "campaigns" / "rehearsal-night.yaml"
EARLIER, LATEST = "20261128T020000Z", "20261129T020000Z"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    runs = tmp_path / "gpu-runs"
    make_night(runs, EARLIER, "lmcache-1739-kv-lines.log")
    make_night(runs, LATEST, "enginecore-compilation-spec-decode.log")
    return runs


def _durations(runs: Path) -> list:
    trend = summary_for_campaign(CAMPAIGN, runs)["trends"]["kv-auto"]
    return [values.get("duration_s") for _, values in trend]


def test_a_trend_still_refuses_a_run_json_not_shaped_as_a_record(runs: Path) -> None:
    assert _durations(runs) == [430.0, 430.0]
    record = runs / f"rehearsal-kv-auto-{EARLIER}-0001" / "run.json"
    doc = json.loads(record.read_text())
    record.write_text(json.dumps({**doc, "status": "fine"}))  # not a status word
    assert _durations(runs) == [None, 430.0]  # its figures are not believed
    [kept] = [r for r in load_night(record.parent.parent / "nights" /
                                    f"rehearsal-night-{EARLIER}", trend=True)[1]
              if r["row"]["control"] == "kv-auto"]
    assert kept["run"] is None and kept["problems"]


def test_a_trend_reads_no_gate0_values_and_no_reference(runs: Path) -> None:
    night = runs / "nights" / f"rehearsal-night-{EARLIER}"
    whole, trend = load_night(night)[1], load_night(night, trend=True)[1]
    refused = [r for r in whole if (r["run"] or {}).get("status") == "refused"]
    assert refused and all(r["gate0"] is not None for r in refused)
    assert all(r["gate0"] is None and r["reference"] is None for r in trend)
    assert [r["run"]["run_id"] for r in trend if r["run"]] == \
        [r["run"]["run_id"] for r in whole if r["run"]]


def test_the_history_leaves_the_collector_as_it_found_it(runs: Path) -> None:
    before = gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()
    summary_for_campaign(CAMPAIGN, runs)
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == before


def test_every_reader_of_summary_json_keeps_the_one_bound(runs: Path, monkeypatch) -> None:
    night = runs / "nights" / f"rehearsal-night-{LATEST}"
    write_night_summary(night)
    assert ending.summary_doc(night)["headline"] and headline_of(night)
    assert read_summary(night).counts and read_night(night)["runs"]
    monkeypatch.setattr(ending, "SUMMARY_LIMIT", 100)
    assert ending.summary_doc(night) is None and headline_of(night) is None
    with pytest.raises(SummaryUnreadable, match="over the 100 byte limit"):
        read_summary(night)
    with pytest.raises(InvalidInput, match="over the 100 byte limit"):
        read_night(night)


def test_a_trend_in_bytes_is_plotted_in_mib() -> None:
    from harness.readers.report.page import render_html
    from harness.readers.report.summary import build_summary

    trends = {"c": [(f"camp-202611{d:02d}T020000Z", {"memory_peak_bytes": d << 20,
                                                       "status": "accepted"}) for d in (3, 5)]}
    page = render_html(build_summary({"name": "camp-20261105T020000Z"}, [], trends))
    caption = page.index("<figcaption>peak memory</figcaption>")
    svg = page[page.rindex("<svg", 0, caption):caption]
    assert "MiB" in svg and ">4</text>" in svg and str(5 << 20) not in page

"""Assembling a night's report (with its campaign's earlier nights) and writing it to disk."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

from harness.base.atomic import dumps_json, write_text
from harness.base.errors import HarnessError, InvalidInput
from harness.measure import perflog
from harness.measure.nightfolder.naming import NIGHTS, night_folders
from harness.readers.report.nights import (
    campaign_name,
    load_night,
    rerun_links,
    with_night_evidence,
)
from harness.readers.report.page import render_html
from harness.readers.report.summary import build_summary, csv_rows, render_markdown, trend_points

FORMATS = ("table", "md", "html", "json", "csv")
SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json",
            ".csv": "csv", ".txt": "table"}


def _history(nights: list[Path], current: Path, current_records: list[dict]) -> dict:
    """Trend points across `nights` (oldest first); unreadable nights are left out. Each night
    is reduced before the next is read, so a year of nights costs the memory of one. Its
    millions of short-lived objects are in no cycle (reference counting frees them): the
    collector, at its default pace over all that is alive, took a sixth of the report."""
    current_real = current.resolve()

    def loaded() -> Iterator[tuple[str, list[dict]]]:
        for night in nights:
            if night.resolve() == current_real:
                yield night.name, current_records
                continue
            try:
                yield night.name, load_night(night, trend=True)[1]
            except HarnessError:
                continue

    pace = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(10_000, 50, 50)
    try:
        return trend_points(loaded())
    finally:
        gc.set_threshold(*pace)
        gc.unfreeze()


def _summary(night_dir: Path, info: dict, records: list[dict], nights: list[Path],
             runs_dir: Path) -> dict:
    with_night_evidence(records)
    return build_summary(info, records, _history(nights, night_dir, records),
                         rerun_links(runs_dir))


def summary_for_night(night_dir: Path) -> dict:
    """The summary of one night, with trends over its campaign's nights up to it."""
    night_dir = Path(night_dir)
    info, records = load_night(night_dir)
    siblings = night_folders(night_dir.parent, info["campaign"]) if info.get("campaign") else []
    names = [p.name for p in siblings]
    if night_dir.name in names:
        siblings = siblings[: names.index(night_dir.name) + 1]
    else:
        siblings = [night_dir]
    return _summary(night_dir, info, records, siblings, night_dir.parent.parent)


def summary_for_campaign(campaign_file: Path, runs_dir: Path) -> dict:
    """The summary of the campaign's latest night under `runs_dir/nights`, trends over all."""
    name = campaign_name(campaign_file)
    nights = night_folders(Path(runs_dir) / NIGHTS, name)
    if not nights:
        raise InvalidInput(f"no nights of campaign {name!r} under {Path(runs_dir) / NIGHTS}")
    return _summary(nights[-1], *load_night(nights[-1]), nights, Path(runs_dir))


def render(summary: dict, fmt: str, width: int = 100) -> str:
    """The summary in one of FORMATS (`table`: the terminal's, `width` columns at most)."""
    if fmt == "table":
        from harness.readers.report.table import render_table

        return render_table(summary, width)
    renderers = {"md": render_markdown, "html": render_html, "json": dumps_json,
                 "csv": lambda s: perflog.csv_text(csv_rows(s))}
    if fmt not in renderers:
        raise InvalidInput(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
    return renderers[fmt](summary)


#: The files a night's summary is written as, by format: the one list of their names.
SUMMARY_FILES = {"md": "summary.md", "html": "summary.html", "json": "summary.json"}


def write_night_summary(night_dir: Path) -> list[Path]:
    """Write summary.md, summary.html and summary.json into the night folder (atomically)."""
    summary = summary_for_night(night_dir)
    written = [Path(night_dir) / name for name in SUMMARY_FILES.values()]
    for fmt, path in zip(SUMMARY_FILES, written, strict=True):
        write_text(path, render(summary, fmt))
    return written

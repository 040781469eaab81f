"""summary.html in a real browser: Debian's chromium, headless, driven by Playwright.

Nothing is fetched: Playwright's own browsers are never downloaded (the system chromium
is launched by path) and every request that is not a file of the night is aborted and
counted. The page must load without console errors, show its plots and its links, and
not scroll sideways at 1280 or at 800 px. Screenshots of both widths are kept as test
artefacts (HARNESS_SCREENSHOTS, default benchmarks/out/report-screens/) and their paths
printed. Under CI=true a missing chromium or Playwright fails the test; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from harness.readers.report.morning import write_night_summary
from tests.browser.offline import browser_or_skip, offline_page
from tests.unit.test_summary_report import make_night

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("HARNESS_SCREENSHOTS", ROOT / "benchmarks" / "out" / "report-screens"))
WIDTHS = (1280, 800)


def _with_reference(runs: Path) -> None:
    """Give one run of the night a reference verdict: one figure within, one outside."""
    folder = next(p for p in runs.iterdir() if p.name == "rehearsal-kv-auto-20261129T020000Z-0001")
    step = folder / "post-steps" / "reference"
    step.mkdir(parents=True)
    step.joinpath("verdict.json").write_text(json.dumps({"verdict": "accepted", "findings": [
        {"metric": "kv_cache_gib", "value": 66.37, "lower": 60, "upper": 70, "outside": False,
         "refuse": False},
        {"metric": "lock_wait_s", "value": 2.25, "lower": None, "upper": 1.0, "outside": True,
         "refuse": False}]}))


@pytest.fixture
def page_file(tmp_path: Path) -> Path:
    runs = tmp_path / "gpu-runs"
    make_night(runs, "20261128T020000Z", "lmcache-1739-kv-lines.log", refuse_second=False)
    make_night(runs, "20261129T020000Z", "enginecore-compilation-spec-decode.log")
    _with_reference(runs)
    night = runs / "nights" / "rehearsal-night-20261129T020000Z"
    write_night_summary(night)
    return night / "summary.html"


def _check(page, width: int, base: str) -> dict:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(base, wait_until="load")
    return page.evaluate("""() => ({
        scroll: document.documentElement.scrollWidth,
        inner: window.innerWidth,
        plots: [...document.querySelectorAll('figure svg')].map(s => {
            const r = s.getBoundingClientRect(); return [r.width, r.height, r.right]; }),
        links: [...document.querySelectorAll('td a[href]')].map(a => a.getAttribute('href')),
        statuses: [...document.querySelectorAll('.status')].map(s => s.textContent),
        outside: document.querySelectorAll('.ref.outside').length,
        scripts: document.querySelectorAll('script').length,
    })""")


def test_summary_html_in_headless_chromium(page_file: Path) -> None:
    exe = browser_or_skip()
    SHOTS.mkdir(parents=True, exist_ok=True)
    base = page_file.as_uri()
    with offline_page(exe) as seen:
        page = seen.page
        for width in WIDTHS:
            got = _check(page, width, base)
            assert got["scroll"] <= got["inner"], f"{width} px: scrolls sideways {got}"
            assert len(got["plots"]) >= 3, got["plots"]  # status, duration, lock wait …
            for w, h, right in got["plots"]:
                assert w > 100 and h > 50 and right <= width, (width, got["plots"])
            shot = SHOTS / f"summary-{width}.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")
        assert got["scripts"] == 0  # the hostile reason's <script> stayed text
        assert {"✓ accepted", "✗ refused"} <= set(got["statuses"]), got["statuses"]
        assert got["outside"] == 1
        folders = [h for h in got["links"] if h.endswith("0001")]
        assert len(folders) == 2 and len(got["links"]) == 8, got["links"]  # 4 per run
        for href in got["links"]:
            target = Path(unquote(urlparse(urljoin(base, href)).path))
            if not href.endswith("stderr.log"):  # the fixture writes stdout only
                assert target.exists(), href
    assert seen.errors == [], seen.errors
    assert seen.foreign == [], seen.foreign

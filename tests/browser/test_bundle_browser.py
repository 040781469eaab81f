"""A bundle reads on its own: its index.html and the night's summary.html, opened from the
unpacked bag in Debian's chromium (headless, driven by Playwright), link only files that
are inside the bag.

A real night is run against the real Docker engine (the rehearsal image), exported with
`harness bundle export NIGHT_DIR` and unpacked by the harness's own safe extraction into
a fresh folder, far from the runs folder it came from: a link that still worked only
because the original tree was beside it (`../../<run-id>` out of the bag) would resolve
to nothing here and fail. Every `href` and `src` of both pages is resolved against the
page's own URL, the way the browser does, and must name a file or folder inside the bag;
a `#fragment` must name an element of the page. Nothing is fetched: every request that
is not a file is aborted and counted, and the pages must load without console errors.
Under CI=true a missing chromium or Playwright fails the test; elsewhere it skips.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

from harness.readers.bundle.safe_extract import unpack
from tests.browser.offline import browser_or_skip, offline_page

LINKS_JS = """() => ({
    links: [...document.querySelectorAll('[href],[src]')].map(
        e => e.getAttribute('href') ?? e.getAttribute('src')),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    scripts: document.querySelectorAll('script').length,
})"""


def _night_bundle(project, cleanup_containers, out: Path) -> Path:
    """Run a real night (one accepted run, one refused), export it; return the archive."""
    project.control("fine", 'command: [python3, -c, "print(\'ok\')"]\n')
    project.control("bad", 'command: [python3, -c, "print(\'no\')"]\n'
                    "post_steps:\n  - exit-code\n  - {name: never, run: [\"false\"]}\n")
    camp = project.campaign("browsecamp", ["fine", "bad"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stdout + r.stderr  # the refused run, on purpose
    [night] = sorted((project.runs / "nights").iterdir())
    assert (night / "summary.html").is_file()
    r = project.harness("bundle", "export", str(night), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert f"sha256 {digest}  {out}" in r.stdout  # what the sender gives out of band
    return out


def _resolve(page_url: str, href: str, ids: list[str], root: Path) -> Path | None:
    """The file or folder inside the bag that `href` on `page_url` names (None for a
    fragment of the page itself, which must name one of its `ids`)."""
    target, fragment = urldefrag(urljoin(page_url, href))
    if target == urldefrag(page_url)[0]:
        assert fragment in ids, f"{href}: no element #{fragment} on the page"
        return None
    url = urlparse(target)
    assert url.scheme == "file", f"{href}: leaves the bag ({target})"
    path = Path(unquote(url.path)).resolve()
    assert path.is_relative_to(root), f"{href} on {page_url}: escapes the bag to {path}"
    assert path.is_file() or path.is_dir(), f"{href} on {page_url}: dead link to {path}"
    return path


def _links_of(page, url: str, root: Path) -> list[Path]:
    """Open `url` and return what each of its links resolves to inside the bag."""
    page.goto(url, wait_until="load")
    got = page.evaluate(LINKS_JS)
    assert got["scripts"] == 0, url
    found = [_resolve(url, href, got["ids"], root) for href in got["links"]]
    return [p for p in found if p is not None]


def test_a_bundles_index_and_summary_link_only_files_inside_the_bag(
        project, cleanup_containers, tmp_path):
    exe = browser_or_skip()

    archive = _night_bundle(project, cleanup_containers, tmp_path / "night.tar.gz")
    root = unpack(archive, tmp_path / "unpacked" / "far" / "away").root.resolve()
    [night] = (root / "data" / "nights").iterdir()
    runs = sorted(p for p in (root / "data").iterdir() if p.name != "nights")
    assert len(runs) == 2 and all((r / "run.json").is_file() for r in runs), runs
    with offline_page(exe) as seen:
        from_index = _links_of(seen.page, (root / "index.html").as_uri(), root)
        summary = night / "summary.html"
        assert summary in from_index, from_index  # the night's summary, in its place
        assert {r / "run.json" for r in runs} <= set(from_index), from_index
        from_summary = _links_of(seen.page, summary.as_uri(), root)
    for run in runs:  # the summary links each run's folder, record and both logs
        for part in ("", "run.json", "logs/stdout.log", "logs/stderr.log"):
            assert (run / part).resolve() in from_summary, (run / part, from_summary)
    assert seen.errors == [], seen.errors
    assert seen.foreign == [], seen.foreign


LAYOUT_JS = """() => {
    const box = e => e.getBoundingClientRect();
    const wide = document.querySelector('.wide'), table = document.querySelector('table');
    return {
        page: [document.documentElement.scrollWidth, window.innerWidth],
        table: [table.scrollWidth, wide.clientWidth],
        ids: [...document.querySelectorAll("td.id a:not(.rec)")].map(
            a => [a.textContent, a.getClientRects().length]),
        statuses: [...document.querySelectorAll('.st')].map(s => [
            s.textContent, box(s).width > 0 && box(s).height > 0 && box(s).right <= innerWidth,
            getComputedStyle(s).color, getComputedStyle(s).backgroundColor]),
        styled: getComputedStyle(document.body).fontFamily,
    };
}"""
LONG_IDS = {"kv-warmup-engine-multiprocess-layout-20261130T083000Z-3fa2b1c4": "accepted",
            "kv-warmup-engine-gate0-seed-case-20261130T090000Z-00c0ffee": "refused",
            "kv-warmup-engine-one-process-20261130T093000Z-deadbeef": "interrupted"}


def _bundle_of_long_ids(tmp_path: Path) -> Path:
    """Three sealed runs with long ids and three statuses, bundled by the real CLI and
    unpacked far away; the unpacked bag's root."""
    import json
    import subprocess
    import sys

    from tests.unit.bundle_helpers import make_run, seal

    folders = []
    for run_id, status in LONG_IDS.items():
        run = make_run(tmp_path / "runs", run_id)
        record = json.loads((run / "run.json").read_text())
        record["status"] = status
        if status == "accepted":  # a rerun of the interrupted one: that row gets a long note
            record["rerun_of"] = {"run_id": next(i for i, s in LONG_IDS.items()
                                                 if s == "interrupted")}
        (run / "run.json").write_text(json.dumps(record))
        seal(run)
        folders.append(str(run))
    out = tmp_path / "long.tar.gz"
    r = subprocess.run([sys.executable, "-m", "harness", "bundle", "export", *folders, "-o",
                        str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return unpack(out, tmp_path / "unpacked").root.resolve()


def test_the_bundle_index_reads_at_1280_and_900_px_without_breaking_a_run_id(tmp_path):
    exe = browser_or_skip()
    root = _bundle_of_long_ids(tmp_path)
    with offline_page(exe) as seen:
        for width in (1280, 900):
            seen.page.set_viewport_size({"width": width, "height": 900})
            seen.page.goto((root / "index.html").as_uri(), wait_until="load")
            got = seen.page.evaluate(LAYOUT_JS)
            assert got["page"][0] <= got["page"][1], (width, got["page"])  # no page scroll
            assert got["table"][0] <= got["table"][1], (width, got["table"])  # table fits
            assert sorted(i for i, _ in got["ids"]) == sorted(LONG_IDS)
            assert all(lines == 1 for _, lines in got["ids"]), (width, got["ids"])
            assert sorted(s[0] for s in got["statuses"]) == sorted(LONG_IDS.values())
            assert all(s[1] for s in got["statuses"]), (width, got["statuses"])
            colours = {s[0]: s[2:] for s in got["statuses"]}
            assert colours["accepted"] != colours["refused"]  # told apart, not only by word
            assert "serif" not in got["styled"] or "sans" in got["styled"]
    assert seen.errors == [] and seen.foreign == []

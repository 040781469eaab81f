"""The browser tests' one way to open a local page: Debian's chromium (never a downloaded
browser) through playwright, offline. Every request that is not a `file://` URL is
aborted and recorded, and every console or page error is recorded, so a test can assert
that a report or a bundle's page fetches nothing and runs no script that fails."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest


def browser_or_skip() -> str:
    """The chromium executable; a missing one fails under CI and skips elsewhere."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        exe = None
    if exe is None:
        why = "needs Debian's chromium (apt-get install chromium) and playwright (make setup)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"the browser test {why}; under CI it must run, never skip")
        pytest.skip(why)
    return exe


@dataclass
class Offline:
    """An open page, and what it did that a local page must not."""

    page: Any
    errors: list[str] = field(default_factory=list)  # console errors and page errors
    foreign: list[str] = field(default_factory=list)  # URLs it tried to fetch, aborted


@contextlib.contextmanager
def offline_page(exe: str) -> Iterator[Offline]:
    """A fresh page of a headless chromium that can reach only `file://` URLs."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            seen = Offline(browser.new_page())
            seen.page.on("console",
                         lambda m: seen.errors.append(m.text) if m.type == "error" else None)
            seen.page.on("pageerror", lambda e: seen.errors.append(str(e)))

            def route(r: Any) -> Any:
                if not r.request.url.startswith("file://"):
                    seen.foreign.append(r.request.url)
                    return r.abort()
                return r.continue_()

            seen.page.route("**/*", route)
            yield seen
        finally:
            browser.close()

"""How progress reaches a person: a live display on a terminal, JSON lines otherwise.

Unattended runs (cron, systemd) get one JSON object per event on stderr, which journald
and log shippers keep; a terminal gets readable lines and a waiting spinner.
"""

from __future__ import annotations

import json
import sys
import time

from rich.console import Console
from rich.markup import escape

from harness.lock import describe_holder
from harness.timeutil import utc_now


class Reporter:
    """Plain JSON lines: the unattended form."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self._last_wait = 0.0

    def event(self, kind: str, **fields: object) -> None:
        rec = {"at": utc_now(), "event": kind, **fields}
        print(json.dumps(rec, default=str), file=self.stream, flush=True)

    def waiting(self, holder: dict | None, waited: float) -> None:
        if time.monotonic() - self._last_wait >= 30 or self._last_wait == 0.0:
            self._last_wait = time.monotonic()
            self.event("lock-wait", waited_s=round(waited, 1), holder=holder)

    def close(self) -> None:
        pass


class TerminalReporter(Reporter):
    """Readable lines and a live status line while waiting for the lock."""

    def __init__(self) -> None:
        super().__init__()
        self.console = Console(stderr=True)
        self._status = None

    def event(self, kind: str, **fields: object) -> None:
        self._stop_status()
        detail = " ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, "", []))
        self.console.print(f"[dim]{utc_now()[11:19]}[/dim] [bold]{kind}[/bold] {escape(detail)}",
                           highlight=False, markup=True)

    def waiting(self, holder: dict | None, waited: float) -> None:
        # The holder record is written by whoever holds the lock: never rich markup.
        text = escape(f"waiting {waited:.0f}s for the GPU lock, held by "
                      f"{describe_holder(holder)}")
        if self._status is None:
            self._status = self.console.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        self._stop_status()


def reporter(json_lines: bool | None = None) -> Reporter:
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    return Reporter() if json_lines else TerminalReporter()

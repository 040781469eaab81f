"""The night on a terminal: a live panel (control, lock, elapsed, progress) above event lines.

Without a terminal the plain `Reporter` is used instead: one JSON object per event on
stderr, which journald and cron mail keep as they are.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from harness.base.terminal import isatty
from harness.base.timeutil import utc_now
from harness.measure.lock import describe_holder
from harness.measure.ui import Reporter, sentence
from harness.readers.report.inert import inert

QUIET = {"lock-wait"}


def _dim(label: str) -> Text:
    return Text(label, style="dim")


class NightLive(Reporter):
    """A rich Live panel refreshed twice a second, with each event printed above it."""

    def __init__(self, campaign: str, total: int = 0) -> None:
        super().__init__()
        self.console = Console(file=self.stream)
        self.campaign = campaign
        self.t0 = time.monotonic()
        self.fields = {"night": "starting", "control": "none started yet", "lock": "-",
                       "run": "-"}
        self.done = 0
        self.total = total  # the plan's size from the start; the journal's once it is read
        self.live = Live(console=self.console, refresh_per_second=2, transient=True,
                         get_renderable=self._render)
        self.live.start()

    def _render(self) -> Group:
        t = Table(show_header=False, box=None, pad_edge=False)
        elapsed = int(time.monotonic() - self.t0)
        h, rest = divmod(elapsed, 3600)
        # campaign, control names, run ids and holder records come from files and the journal:
        # shown inert (no ESC or OSC-8 reaches the terminal) and as Text (rich reads no
        # `[link=…]` markup or `:emoji:` code in them).
        t.add_row(_dim("night"), Text(inert(f"{self.campaign}  {self.fields['night']}")))
        for key in ("control", "run", "lock"):
            t.add_row(_dim(key), Text(inert(self.fields[key])))
        t.add_row(_dim("elapsed"), Text(f"{h:d}:{rest // 60:02d}:{rest % 60:02d}"))
        t.add_row(_dim("progress"), Text(f"{self.done}/{self.total}"))
        bar = ProgressBar(total=max(self.total, 1), completed=self.done, width=40)
        return Group(t, bar)

    def set_progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def event(self, kind: str, **fields: object) -> None:
        if kind == "night-start":
            self.fields["night"] = str(fields.get("dir", "-"))
        elif kind == "control-start":
            self.fields["control"] = f"{fields.get('control')} (attempt {fields.get('attempt')})"
        elif kind == "run":
            self.fields["run"] = str(fields.get("run_id"))
        elif kind == "lock-acquired":
            self.fields["lock"] = f"held by this night (waited {fields.get('wait_s')} s)"
        elif kind in ("lock-released", "sealed"):
            self.fields["lock"] = "released"
        if kind in QUIET:
            return
        line = Text.assemble(_dim(utc_now()[11:19]), " ", inert(sentence(kind, fields), 20_000))
        self.console.print(line, highlight=False, soft_wrap=True)

    def waiting(self, holder: dict | None, waited: float) -> None:
        self.fields["lock"] = f"waiting {waited:.0f}s, held by {describe_holder(holder)}"

    def close(self) -> None:
        self.live.stop()


class NightLines(Reporter):
    """JSON lines; `set_progress` adds a progress event so logs show N/M too."""

    def set_progress(self, done: int, total: int) -> None:
        self.event("progress", done=done, total=total)


def night_reporter(campaign: str, json_lines: bool | None, total: int = 0) -> Reporter:
    if json_lines is None:
        json_lines = not isatty(sys.stderr)
    return NightLines() if json_lines else NightLive(campaign, total)

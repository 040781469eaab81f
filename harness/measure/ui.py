"""How progress reaches a person: readable lines on a terminal, JSON lines otherwise.

Unattended runs get one JSON object per event on stderr, which journald keeps. Writes are
best effort: a reader that went away never reaches the run."""

from __future__ import annotations

import json
import math
import sys
import time

from harness.base.terminal import best_effort, isatty
from harness.base.timeutil import utc_now
from harness.measure.lock import clean_text, describe_holder

# One sentence per known event (fields made readable by `human`); any other event, or one
# missing a field its template names, reads as "kind: field value, field value".
SENTENCES = {
    "run": "run {run_id} of control {control} in {dir}",
    "launch": "launching run {run_id} in image {image}",
    "lock-acquired": "took the GPU lock {lock} after waiting {wait_s}",
    "lock-released": "released the GPU lock after holding it {hold_s}",
    "lock-wait": "waiting for the GPU lock ({waited_s} so far), held by {holder}",
    "container": "container {id} started",
    "post-step": "post-step {name} started",
    "post-step-done": "post-step {name} done: {verdict} (exit {exit_code})",
    "sealed": "run {run_id} sealed as {status} in {dir}{reasons}",
    "mounts-refused": "mounts refused: {reasons}",
    "mounts-sanitized": "read-write mounts cleaned after the run: {reasons}",
    "orphan-removed": "removed container {id} left by run {run_id} (exit {exit_code})",
    "error": "stage {stage} failed: {error}",
    "interrupted": "interrupted by {signal}{doing}{again}",
    "recovered": "recovered {dir} as {status}",
    "cancelled": "control {control} cancelled: {why}",
    "recovery-deferred": "not recovering {dir} yet: {why}",
    "stop-policy": "stop policy {policy}: stopping after a {status} run",
    "night-start": "night of campaign {campaign} started in {dir}{resumed}{deadline}",
    "night-end": "night ended ({why}), exit code {exit_code}: {progress}",
    "control-start": "control {control}, attempt {attempt}",
    "deferred": "control {control} deferred: {reasons}",
    "deadline": "deadline {deadline} reached with {left} control(s) not started",
    "not-executed": "control {control} not executed: {why}",
    "skipped": "control {control} skipped: {why}",
    "night-lock-wait": "waiting for the night lock held by {holder} ({waited_s} so far, "
                       "up to {wait_s})",
    "progress": "{done}/{total} done",
    "metrics-not-written": "metrics not written: {error}",
    "summary-failed": "the morning summary was not written: {error}",
    "summary-start": "writing the morning summary (summary.md, summary.html) …",
    "regression-call": "run {run_id} called against its earlier runs; regressions: "
                       "{regressions}{confirmed}; sealed in {addendum}",
    "regression-rerun": "run {run_id} of control {control} may have regressed in {figures}: "
                        "attempt {attempt} reruns it to confirm before anyone is told",
    "regression-not-rerun": "run {run_id} may have regressed, but is not rerun: {why}",
    "regression-uncalled": "run {run_id} not called against its earlier runs: {why}",
    "regression-failed": "the regression call of run {run_id} failed: {error}",
    "rerun-index-failed": "the rerun of {run_id} is not in the rerun index: {error}",
    "slurm-claimed": "job {job_id}: the night stopped before these launched, and never will: "
                     "{controls}",
    "slurm-claim-failed": "control {control}: its claim could not be made ({problem}); it is "
                          "followed to its seal",
}
# Optional parts: shown (in this form) only when the field is there and not empty or false.
OPTIONAL = {"sealed": {"reasons": ": {}"}, "interrupted": {"doing": ": {}", "again": "; {}"},
            "regression-call": {"confirmed": "; confirmed by its rerun: {}"},
            "night-start": {"resumed": " (resumed)", "deadline": ", until {}"}}


def human(key: str, value: object) -> str:
    """One value as words on one line: seconds with a unit, lists joined, progress as N/M."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and key.endswith("_s") and value == value:
        return f"{value:.3g} s" if abs(value) < 100 else f"{value:.0f} s"
    if isinstance(value, int) and not isinstance(value, bool) and key.endswith("_s"):
        return f"{value} s"
    if isinstance(value, float):
        return f"{value:g}"
    if key == "holder" and (value is None or isinstance(value, dict)):
        return describe_holder(value)
    if isinstance(value, dict) and {"done", "total"} <= value.keys():
        states = value.get("states")
        rest = f"; {human('states', states)}" if isinstance(states, dict) and states else ""
        return f"{value['done']}/{value['total']} done{rest}"
    if isinstance(value, dict):
        return ", ".join(f"{human('', k)} {human(str(k), v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "; ".join(human(key, v) for v in value) or "none"
    return clean_text(str(value), 4000)


def to_ms(key: str, value: object) -> object:
    """A `*_s` float rounded to the millisecond for a JSON line (the run folder is exact)."""
    if isinstance(value, float) and key.endswith("_s") and math.isfinite(value):
        return round(value, 3)
    return value


def wait_line(holder: dict | None, waited: float) -> str:
    """Pure: the plain line for a lock wait off a terminal."""
    so_far = f" ({waited:.0f} s so far)" if waited >= 1 else ""
    return f"waiting for the GPU lock held by {describe_holder(holder)}{so_far} …"


def sentence(kind: str, fields: dict[str, object]) -> str:
    """The readable line for one event (pure; the JSON form keeps the exact values)."""
    shown = {k: human(k, v) for k, v in fields.items() if v is not None or k == "holder"}
    for k, form in OPTIONAL.get(kind, {}).items():
        shown[k] = form.format(shown[k]) if fields.get(k) not in (None, "", [], False) else ""
    template = SENTENCES.get(kind)
    if template is not None:
        try:
            return template.format(**shown)
        except (KeyError, IndexError, ValueError):
            pass
    detail = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in shown.items()
                       if fields.get(k) not in ("", []))
    return f"{clean_text(kind)}: {detail}" if detail else clean_text(kind)


WAIT_EVERY_S = 30  # a waiting line when the wait begins, then one this often


class Reporter:
    """Plain JSON lines: the unattended form."""

    def __init__(self, stream=None) -> None:
        self.stream = best_effort(stream or sys.stderr)
        self._last_wait = 0.0

    def event(self, kind: str, **fields: object) -> None:
        rec = {"at": utc_now(), "event": kind, **{k: to_ms(k, v) for k, v in fields.items()}}
        print(json.dumps(rec, default=str), file=self.stream, flush=True)

    def waiting(self, holder: dict | None, waited: float) -> None:
        if self._wait_due():
            self.event("lock-wait", waited_s=round(waited, 1), holder=holder)

    def _wait_due(self) -> bool:
        """Whether a waiting line is due: when the wait begins, then every WAIT_EVERY_S."""
        now = time.monotonic()
        if self._last_wait and now - self._last_wait < WAIT_EVERY_S:
            return False
        self._last_wait = now
        return True

    def close(self) -> None:
        pass


class TerminalReporter(Reporter):
    """Readable lines and a live status line while waiting for the lock."""

    def __init__(self) -> None:
        super().__init__()
        # rich is imported here, not with the module: JSON lines (a night, a script, the
        # benchmarks) never load it, and it is a noticeable part of a run's start
        from rich.console import Console
        from rich.text import Text

        self.console, self._text = Console(file=self.stream), Text
        self._status = None

    def event(self, kind: str, **fields: object) -> None:
        self._stop_status()
        self._print(sentence(kind, fields))

    def _print(self, line: str) -> None:
        """`line` as rich Text, never as a str rich would read: its fields come from
        campaigns, run folders and the lock's holder record, and in a str rich turns
        `[link=…]` into a live hyperlink and `:white_check_mark:` into ✅."""
        self.console.print(self._text.assemble((utc_now()[11:19], "dim"), " ", line),
                           highlight=False, soft_wrap=True)

    def waiting(self, holder: dict | None, waited: float) -> None:
        if not self.console.is_terminal:  # `--no-json-lines | cat`: no spinner to see
            if self._wait_due():
                self._print(wait_line(holder, waited))
            return
        # The holder record is written by whoever holds the lock: Text, never markup.
        text = self._text(f"waiting {waited:.0f}s for the GPU lock, held by "
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
        json_lines = not isatty(sys.stderr)
    return Reporter() if json_lines else TerminalReporter()

"""Waiting for the GPU lock before a run folder exists.

`harness run` waits here, before its run folder is made, while another process holds the
GPU lock: a Ctrl-C during that wait leaves nothing behind (no run folder, no sealed
`interrupted` record, no perflog rows) for a run that never launched. The wait only
probes the lock (`flock.is_free`: taken and dropped at once), it never holds it; the run
takes it for real in its launch stage, after its preflight, as before. The time waited
here is the run's lock wait: `GpuLock(since=...)` counts from when this wait began, so the
lock timeout and the recorded `wait_s` are the same as if the run had waited there.

Another process can still take the lock between this wait and the launch (a preflight
takes seconds); the run then waits in its launch stage, as it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness.base.flock import is_free
from harness.base.timeutil import utc_now
from harness.measure.lock import POLL_S, read_holder

Since = tuple[str, float]  # (UTC time the wait began, its time.monotonic())


def wait_free(path: Path, timeout: float,
              on_wait: Callable[[dict | None, float], None] | None = None) -> Since:
    """Return once the lock at `path` is free, or `timeout` seconds have passed (the
    launch's own acquire then times out and records it), or the lock cannot be probed
    (the launch reports why). Returns when the wait began."""
    since = (utc_now(), time.monotonic())
    while True:
        try:
            if is_free(Path(path)):
                return since
        except OSError:
            return since
        waited = time.monotonic() - since[1]
        if on_wait is not None:
            on_wait(read_holder(Path(path)), waited)
        if waited >= timeout:
            return since
        time.sleep(POLL_S)

"""Waiting for the GPU lock before a run folder exists.

A Ctrl-C during the wait then leaves nothing behind for a run that never launched. The
wait only probes the lock; the launch takes it, counting its wait from when this began."""

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
    """Return when the lock is free, `timeout` passed or it cannot be probed: when it began."""
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

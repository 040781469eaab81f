"""The night lock: one night (or operator rerun) at a time per GPU lock.

A night owns its journal and decides which of its runs died, so two nights must never
drive one GPU lock. The lock is a kernel flock on `<gpu lock>.night` (freed however its
holder dies) with a holder record beside it for refusals and `status`. A `run` or `rerun`
waits for it (up to the lock timeout, ENV-LOCK-TIMEOUT) so neither slips in between a
night's controls; a night finding another night refuses at once (ENV-NIGHT-BUSY), or,
given `wait` (`night --wait`), waits for it that long, saying so."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness.base.catalogue import ENV_LOCK_TIMEOUT, ENV_NIGHT_BUSY
from harness.base.errors import EnvironmentFault
from harness.base.timeutil import utc_now
from harness.measure.lock import HeldFile, read_holder
from harness.measure.nightfolder.holder import describe, night_lock_path

POLL_S = 0.5
SAY_EVERY_S = 30.0  # a night waiting for a night says so when it begins, then this often
BY_HAND = ("run", "rerun")  # kinds an operator starts; a night waits for them


class NightLock:
    """Hold `<gpu lock>.night` for a night or a rerun; write who holds it beside it."""

    def __init__(self, gpu_lock: Path, *, kind: str, campaign: str) -> None:
        self.path = night_lock_path(Path(gpu_lock))
        self.kind = kind
        self.campaign = campaign
        self._file = HeldFile(self.path, "night lock")

    def acquire(self, *, timeout: float,
                on_wait: Callable[[dict | None, float], None] | None = None, wait: float = 0.0,
                on_night: Callable[[str, float], None] | None = None) -> None:
        """Take the lock; a night refuses beside another night (after waiting up to `wait`
        seconds for it, told to `on_night(holder, waited)`), anything else waits."""
        self._file.prepare()
        t0 = time.monotonic()
        said = -SAY_EVERY_S
        while not self._file.try_acquire(0):
            holder = read_holder(self.path)
            waited = time.monotonic() - t0
            if self.kind == "night" and (holder is None or holder.get("kind") not in BY_HAND):
                if waited >= wait:
                    raise EnvironmentFault(
                        f"another night is driving this GPU lock: {describe(holder)}; this "
                        "night refuses to start beside it" + (
                            f" (waited {waited:.0f} s)" if wait else
                            " (`harness night --wait` waits for it)"), rule=ENV_NIGHT_BUSY)
                if on_night and waited - said >= SAY_EVERY_S:
                    said = waited
                    on_night(describe(holder), waited)
                time.sleep(POLL_S)
                continue
            if waited >= timeout:
                raise EnvironmentFault(
                    f"timed out after {waited:.0f}s waiting for the night lock {self.path} "
                    f"(held by {describe(holder)})", rule=ENV_LOCK_TIMEOUT)
            if on_wait:
                on_wait(holder, waited)
            time.sleep(POLL_S)
        self._file.announce(kind=self.kind, campaign=self.campaign, since=utc_now())

    def describe_as(self, **fields: str) -> None:
        """Add what the holder is working on (night folder, run folder) to the record."""
        self._file.update(**fields)

    def release(self) -> None:
        self._file.release()

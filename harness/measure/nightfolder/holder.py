"""Who holds the night lock, read back: its path beside the GPU lock and its holder record.

A night (or an operator's `run` or `rerun`) holds the kernel flock `<gpu lock>.night`
(`harness.base.gpuslot`) and writes beside it who it is and what it works on (kind,
campaign, pid, user, host, since, its night or run folder). `harness status` and the dry
run read that record here; taking and holding the lock is the driver's
(`harness.driver.night.nightlock.NightLock`). The record is hostile: its fields were
cleaned by `harness.measure.lock.read_holder`, and `describe` prints one bounded line.
"""

from __future__ import annotations

from pathlib import Path

from harness.base.gpuslot import GpuSlot
from harness.measure.lock import describe_holder, read_holder


def night_lock_path(gpu_lock: Path) -> Path:
    return GpuSlot(Path(gpu_lock)).night_lock


def read_night_holder(gpu_lock: Path) -> dict | None:
    """Who holds the night lock (with `alive`), or None."""
    return read_holder(night_lock_path(gpu_lock))


def describe(holder: dict | None) -> str:
    """One bounded, printable line (fields were cleaned by `read_holder`)."""
    if not holder:
        return "an unknown process (no holder record yet)"
    if "unreadable" in holder:
        return describe_holder(holder)
    state = "" if holder.get("alive") else ", not running any more"
    what = holder.get("kind", "night")
    where = holder.get("night_dir") or holder.get("run_dir") or "-"
    return (f"{what} of campaign {holder.get('campaign', '?')} (pid {holder.get('pid', '?')}, "
            f"{holder.get('user', '?')}@{holder.get('host', '?')}, "
            f"since {holder.get('since', '?')}, "
            f"{where}{state})")

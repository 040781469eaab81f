"""Who holds the night lock, read back: its path beside the GPU lock and its holder record.

Taking the lock is the driver's; the record is hostile, cleaned by `lock.read_holder`."""

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
            f"{holder.get('user', '?')}@{holder.get('host', '?')}, since "
            f"{holder.get('since', '?')}, {where}{state})")

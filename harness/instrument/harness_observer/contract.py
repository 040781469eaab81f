"""Every name the host and the container both use, spelled once.

The harness (host side) sets these environment variables and mounts these folders; the
instrument (container side) reads them and writes these files. Both import this module:
the host as `harness.instrument.harness_observer.contract`, the container as
`harness_observer.contract`. Standard library only (nothing at all, in fact), so it
imports under the image's Python.
"""

from __future__ import annotations

# -- where the vector mounts things inside the container --------------------------------
INSTRUMENT_TARGET = "/opt/harness-instrument"  # read-only; on PYTHONPATH
OBSERVATIONS_TARGET = "/harness/out"  # the run folder's observations/, writable

# -- environment the harness sets for the workload ---------------------------------------
ENV_OBSERVATIONS_DIR = "HARNESS_OBSERVATIONS_DIR"  # unset: the instrument stays idle
ENV_RUN_ID = "HARNESS_RUN_ID"
ENV_IMAGE_ID = "HARNESS_IMAGE_ID"
ENV_SEAL = "HARNESS_SEAL"
ENV_ENGINE_ARGS = "HARNESS_ENGINE_ARGS"  # the control's `engine:` as JSON
ENGINE_SECRET_PREFIX = "HARNESS_ENGINE_SECRET_"  # one variable per secret engine argument

# -- what the instrument writes into the observations folder -----------------------------
OBSERVATIONS_DIR = "observations"  # its name inside the run folder
PHASES = ("startup", "generation")
STARTUP = "startup.json"
GENERATION = "generation.json"
TRANSITIONS = "transitions.jsonl"

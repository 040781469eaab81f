"""Every name the host and the container both use, spelled once.

The harness (host side) sets these environment variables and mounts these folders; the
instrument (container side) reads them and writes these files. Both import this module:
the host as `harness.instrument.harness_observer.interface`, the container as
`harness_observer.interface`. Standard library only (nothing at all, in fact), so it
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

# -- which process an observation is of --------------------------------------------------
# Every process that holds the engine configuration is observed at start-up and at
# generation, under a name of the instrument's own making (never a process's name, which
# the workload sets). The engine core's pair keeps the plain names above: it is the pair
# the seed's rule binds (docs/gate0-contract.md); the others sit beside it.
FRONTEND = "frontend"  # the process that called LLM(...): the driver's own
ENGINE_CORE = "engine-core"  # where EngineCore sizes the KV cache and schedules
WORKER = "worker"  # each model-running worker, by rank (in the engine core's process
# under the one-process `uni` executor, in its own process under `mp`)
KINDS = (FRONTEND, ENGINE_CORE, WORKER)
MAX_RANK = 4095  # a rank beyond this is not one a real engine has


def document_name(kind: str, phase: str, rank: int = 0) -> str:
    """The file name of one process's observation: `startup.json` (engine core),
    `frontend.startup.json`, `worker-0.generation.json`."""
    if kind not in KINDS or phase not in PHASES:
        raise ValueError(f"no observation document for {kind!r} {phase!r}")
    if kind == ENGINE_CORE:
        return STARTUP if phase == "startup" else GENERATION
    if kind == WORKER:
        if type(rank) is not int or not 0 <= rank <= MAX_RANK:
            raise ValueError(f"a worker rank is an integer 0..{MAX_RANK}, not {rank!r}")
        return f"{WORKER}-{rank}.{phase}.json"
    return f"{kind}.{phase}.json"

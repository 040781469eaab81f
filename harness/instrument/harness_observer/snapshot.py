"""Turn an engine config object into dotted fields, and write observation documents.

`VllmConfig.compilation_config.mode` becomes the field `compilation.mode`: each
`*_config` attribute of the top-level config is a section, walked (dataclasses nested up to
`MAX_DEPTH`) down to leaves, and every leaf goes through the one encoder.
Standard library only; runs inside the engine's container.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
from typing import Any

from . import VERSION
from .encode import SCHEMA, canonical, encode
from .interface import ENV_IMAGE_ID, ENV_OBSERVATIONS_DIR, ENV_RUN_ID, ENV_SEAL

MAX_DEPTH = 3
ENV_OUT = ENV_OBSERVATIONS_DIR


def _attributes(obj: Any) -> list[str]:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [f.name for f in dataclasses.fields(obj)]
    return sorted(vars(obj)) if hasattr(obj, "__dict__") else []


def _walk(prefix: str, obj: Any, depth: int, out: dict, errors: list[str]) -> None:
    for name in _attributes(obj):
        if name.startswith("_"):
            continue
        path = f"{prefix}.{name}"
        try:
            value = getattr(obj, name)
        except Exception as e:  # a property that raises: record it, mark incomplete
            errors.append(f"{path}: {type(e).__name__}: {e}")
            continue
        if depth < MAX_DEPTH and dataclasses.is_dataclass(value) and not isinstance(value, type):
            _walk(path, value, depth + 1, out, errors)
        else:
            try:
                out[path] = encode(value)
            except Exception as e:
                errors.append(f"{path}: {type(e).__name__}: {e}")


def section_name(attribute: str) -> str:
    """`compilation_config` -> `compilation`; other names stay as they are."""
    return attribute[: -len("_config")] if attribute.endswith("_config") else attribute


def snapshot_fields(config: Any) -> tuple[dict[str, Any], list[str]]:
    """(fields, errors) for every `*_config` section of the engine config."""
    fields: dict[str, Any] = {}
    errors: list[str] = []
    for attribute in _attributes(config):
        if not attribute.endswith("_config"):
            continue
        try:
            section = getattr(config, attribute)
        except Exception as e:
            errors.append(f"{attribute}: {type(e).__name__}: {e}")
            continue
        if section is None:
            fields[section_name(attribute)] = None
        elif dataclasses.is_dataclass(section) or hasattr(section, "__dict__"):
            _walk(section_name(attribute), section, 1, fields, errors)
        else:
            fields[section_name(attribute)] = encode(section)
    return fields, errors


def resolve(config: Any, dotted: str) -> Any:
    """The object at a dotted field name on the live config (`compilation.custom_ops`)."""
    head, *rest = dotted.split(".")
    obj = getattr(config, f"{head}_config") if hasattr(config, f"{head}_config") else getattr(
        config, head)
    for part in rest:
        obj = getattr(obj, part)
    return obj


def process_identity(rank: int = 0, kind: str | None = None) -> dict[str, Any]:
    """Who observes: which of the engine's processes (`kind`, the instrument's word), the
    process name vLLM gave it (`role`, e.g. EngineCore, VllmWorker-0), the rank, the pid."""
    return {"kind": kind, "role": multiprocessing.current_process().name, "rank": int(rank),
            "pid": os.getpid()}


def source_identity() -> dict[str, Any]:
    """What ran: the harness's seal and image Id (from the environment) and the engine."""
    engine = None
    try:
        import vllm  # the engine in this container; absent on a bare interpreter

        engine = f"vllm@{getattr(vllm, '__version__', 'unknown')}"
    except Exception:
        engine = None
    return {"seal": os.environ.get(ENV_SEAL), "engine": engine,
            "image": os.environ.get(ENV_IMAGE_ID)}


MAX_HASH_NOTE = 300  # characters of why vLLM's hash could not be taken


def engine_hash(config: Any) -> dict[str, Any]:
    """vLLM's own hash of the configuration (`VllmConfig.compute_hash()`, the key of its
    compile cache), a second witness beside our fields: it is computed by the engine's own
    code from its own values, so an encoding of ours that misses a change cannot hide it
    from this. `value` is None, with a `note` saying why, where the engine has no such
    method or it fails."""
    compute = getattr(config, "compute_hash", None)
    if not callable(compute):
        return {"value": None, "note": f"{type(config).__name__} has no compute_hash()"}
    try:
        value = compute()
    except Exception as e:  # the witness is absent, never the run's failure
        return {"value": None,
                "note": f"compute_hash() raised {type(e).__name__}: {e}"[:MAX_HASH_NOTE]}
    if not isinstance(value, str):
        return {"value": None, "note": f"compute_hash() returned a {type(value).__name__}, "
                "not a string"}
    return {"value": value, "note": None}


def observation(phase: str, config: Any, *, rank: int, hook: str,
                kind: str | None = None) -> dict[str, Any]:
    """Build one observation document of `config` as it stands now."""
    fields, errors = snapshot_fields(config)
    return {
        "schema": SCHEMA,
        "phase": phase,
        "process": process_identity(rank, kind),
        "source": source_identity(),
        "complete": not errors,
        "errors": errors,
        "fields": fields,
        "engine_hash": engine_hash(config),
        "observed": {"hook": hook, "config_id": id(config), "time": time.time(),
                     "run_id": os.environ.get(ENV_RUN_ID),
                     "instrument": f"harness_observer@{VERSION}"},
    }


def out_dir() -> str | None:
    """Where observations go; None when the harness did not ask for any (instrument idle)."""
    return os.environ.get(ENV_OUT) or None


def write_document(directory: str, name: str, doc: dict[str, Any]) -> str:
    """Write `name` atomically and exclusively: an observation is never replaced."""
    path = os.path.join(directory, name)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}")
    data = (json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()
    canonical(doc["fields"])  # refuses NaN that escaped the encoder before anything is written
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if the file exists: the first observation stands
    finally:
        os.unlink(tmp)
    return path

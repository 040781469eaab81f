"""The engine hooks: a `vllm.general_plugins` entry point and a worker extension class.

- `register()` runs in every vLLM process (vLLM's `load_general_plugins`, filtered by
  `VLLM_PLUGINS`). It installs the passive trace and captures the start-up observation in
  the engine-core process when `EngineCore._initialize_kv_caches` returns: model loaded,
  memory profiled, KV cache sized, graphs captured, i.e. the configuration the start-up
  measurements were taken under (inside the handshake, before its second post-init).
  It cannot be later in `EngineCore.__init__`: that is where vLLM loads the plugins, so
  the running `__init__` is already past any wrapper. The engine sets
  `cache_config.num_gpu_blocks`/`num_cpu_blocks` just after this point: the notes list
  them among the fields that legitimately change, for a contract to leave out.
- `ObserverExtension` is passed as `worker_extension_cls`. The driver calls
  `harness_observer_startup` through `LLM.collective_rpc` once `LLM(...)` returned (the
  engine fully started, after the handshake): it writes `startup.json` and arms a one-shot
  snapshot of the worker's own config at its first `execute_model`, `generation.json`.

With the one-GPU `uni` executor the worker lives in the engine-core process and shares its
config, so both documents name the same process. Any other layout leaves `startup.json`
unwritten, and the finalizer refuses: the instrument fails closed.
Nothing here edits an engine file; hooks are in-memory pass-through wrappers.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from . import trace
from .contract import GENERATION, STARTUP
from .snapshot import observation, out_dir, process_identity, write_document

EXTENSION = "harness_observer.plugin.ObserverExtension"

_captured: dict[str, Any] = {}


def _capture_startup(engine: Any) -> None:
    config = engine.vllm_config
    _captured["startup"] = observation(
        "startup", config, rank=0, hook="EngineCore._initialize_kv_caches returned")
    _captured["pid"] = os.getpid()
    tracer = trace.tracer()
    if tracer is not None:
        tracer.checkpoint(config, "startup-captured")


def _wrap_engine_init() -> None:
    from vllm.v1.engine.core import EngineCore

    original = EngineCore.__dict__["_initialize_kv_caches"]
    if getattr(original, trace.MARK, False):
        return

    @functools.wraps(original)
    def initialize_kv_caches(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        try:
            _capture_startup(self)
        except Exception as e:
            tracer = trace.tracer()
            if tracer is not None:
                tracer.error("startup capture", e)
        return result

    setattr(initialize_kv_caches, trace.MARK, True)
    EngineCore._initialize_kv_caches = initialize_kv_caches


def register() -> None:
    """vLLM general plugin entry point. Idle unless the harness set the observations dir."""
    directory = out_dir()
    if directory is None:
        return
    try:
        trace.install(directory)
        _wrap_engine_init()
    except Exception as e:
        tracer = trace.tracer() or trace.Tracer(directory)
        tracer.error("register", e)


def _write(name: str, doc: dict[str, Any]) -> str | None:
    directory = out_dir()
    return write_document(directory, name, doc) if directory else None


class ObserverExtension:
    """Mixed into the worker class by vLLM (`worker_extension_cls`); `self` is the worker."""

    def harness_observer_startup(self) -> dict[str, Any]:
        """Write the captured start-up observation and arm the generation snapshot."""
        tracer = trace.tracer()
        config = self.vllm_config
        if tracer is not None:
            tracer.checkpoint(config, "engine-started")
        doc = _captured.get("startup")
        here = process_identity(getattr(self, "rank", 0))
        if doc is None or _captured.get("pid") != here["pid"]:
            return {"ok": False, "process": here,
                    "reason": "no start-up capture in this worker's process "
                              "(plugin not loaded, or not the one-process uni executor)"}
        doc = {**doc, "process": {**doc["process"], "rank": here["rank"]}}
        path = _write(STARTUP, doc)
        self._harness_observer_arm()
        return {"ok": path is not None, "process": here, "startup": path}

    def _harness_observer_arm(self) -> None:
        original = self.execute_model
        fired = []

        @functools.wraps(original)
        def execute_model(*args: Any, **kwargs: Any) -> Any:
            if not fired:
                fired.append(True)
                self._harness_observer_generation()
            return original(*args, **kwargs)

        self.execute_model = execute_model

    def _harness_observer_generation(self) -> None:
        tracer = trace.tracer()
        try:
            config = self.vllm_config
            if tracer is not None:
                tracer.checkpoint(config, "generation-step")
            doc = observation("generation", config, rank=getattr(self, "rank", 0),
                              hook="Worker.execute_model first call")
            _write(GENERATION, doc)
        except Exception as e:
            if tracer is not None:
                tracer.error("generation snapshot", e)

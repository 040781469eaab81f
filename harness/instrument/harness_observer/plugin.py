"""The engine hooks: a `vllm.general_plugins` entry point and a worker extension class.

Every process that holds the engine configuration is observed twice, each writing its own
documents (interface.document_name), each naming its kind, process name, rank and pid:

- the **engine core**: start-up when `EngineCore._initialize_kv_caches` returns (model
  loaded, memory profiled, KV cache sized, warmed up: the configuration the start-up
  measurements were taken under, inside the handshake and before its second post-init);
  generation at its executor's first `execute_model`. This pair is `startup.json` and
  `generation.json`, the pair the seed's rule binds.
- **each worker**, asked by the engine core right at that start-up capture through its own
  executor's `collective_rpc` (so at the same point of the engine's life in every layout):
  start-up of the worker's own config, then generation at the worker's first
  `execute_model`. Under the one-process `uni` executor the worker shares the engine core's
  process and config object; under `mp` (always on vLLM's CPU platform, and with tensor
  parallelism) it holds a pickled copy in its own process.
- the **front-end** (`LLM`'s process) is observed by the driver (driver.py).

`register()` runs in every vLLM process (vLLM's `load_general_plugins`, filtered by
`VLLM_PLUGINS`) and installs the passive trace and the start-up hook. It cannot hook later
in `EngineCore.__init__`: that is where vLLM loads the plugins, so the running `__init__`
is already past any wrapper. A process that is never reached leaves its documents
unwritten, and the finalizer refuses naming it: the instrument fails closed.
Nothing here edits an engine file; hooks are in-memory pass-through wrappers.
"""

from __future__ import annotations

import functools
from typing import Any

from . import trace
from .interface import ENGINE_CORE, WORKER, document_name
from .snapshot import observation, out_dir, write_document

EXTENSION = "harness_observer.plugin.ObserverExtension"
STARTUP_RPC = "harness_observer_startup"


def _write(kind: str, phase: str, doc: dict[str, Any], rank: int = 0) -> str | None:
    directory = out_dir()
    return write_document(directory, document_name(kind, phase, rank), doc) if directory else None


def _note(where: str, error: BaseException) -> None:
    tracer = trace.tracer()
    if tracer is not None:
        tracer.error(where, error)


def _first_call(owner: Any, name: str, before: Any) -> None:
    """Replace `owner.name` (on the instance) by a wrapper that runs `before()` once, at
    its first call, then always calls through; `before` failing never stops the engine."""
    original = getattr(owner, name)
    fired: list[bool] = []

    @functools.wraps(original)
    def first(*args: Any, **kwargs: Any) -> Any:
        if not fired:
            fired.append(True)
            try:
                before()
            except Exception as e:
                _note(f"first {name}", e)
        return original(*args, **kwargs)

    setattr(owner, name, first)


def _capture_startup(engine: Any) -> None:
    """The engine core's start-up: write its document, arm its generation snapshot, and ask
    every worker of its executor for theirs at this same point."""
    config = engine.vllm_config
    tracer = trace.tracer()
    if tracer is not None:
        tracer.checkpoint(config, "startup-captured")
    _write(ENGINE_CORE, "startup", observation(
        "startup", config, rank=0, kind=ENGINE_CORE,
        hook="EngineCore._initialize_kv_caches returned"))
    executor = getattr(engine, "model_executor", None)
    if executor is None:
        return

    def generation() -> None:
        if tracer is not None:
            tracer.checkpoint(config, "engine-core-generation")
        _write(ENGINE_CORE, "generation", observation(
            "generation", config, rank=0, kind=ENGINE_CORE,
            hook="EngineCore executor.execute_model first call"))

    _first_call(executor, "execute_model", generation)
    for reply in executor.collective_rpc(STARTUP_RPC):
        if tracer is not None and not (isinstance(reply, dict) and reply.get("ok")):
            tracer.emit({"event": "error", "where": "worker start-up",
                         "message": repr(reply)[:500]})


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
            _note("startup capture", e)
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


class ObserverExtension:
    """Mixed into the worker class by vLLM (`worker_extension_cls`); `self` is the worker."""

    def harness_observer_startup(self) -> dict[str, Any]:
        """Write this worker's start-up observation and arm its generation snapshot."""
        tracer = trace.tracer()
        config = self.vllm_config
        rank = getattr(self, "rank", 0)
        if tracer is not None:
            tracer.checkpoint(config, "worker-startup")
        try:
            path = _write(WORKER, "startup", observation(
                "startup", config, rank=rank, kind=WORKER,
                hook="EngineCore start-up capture: collective_rpc to the worker"), rank)
        except Exception as e:
            _note("worker startup", e)
            return {"ok": False, "rank": rank, "reason": f"{type(e).__name__}: {e}"}
        _first_call(self, "execute_model", self._harness_observer_generation)
        return {"ok": path is not None, "rank": rank, "startup": path}

    def _harness_observer_generation(self) -> None:
        tracer = trace.tracer()
        config = self.vllm_config
        if tracer is not None:
            tracer.checkpoint(config, "generation-step")
        rank = getattr(self, "rank", 0)
        _write(WORKER, "generation", observation(
            "generation", config, rank=rank, kind=WORKER,
            hook="Worker.execute_model first call"), rank)

"""The image gate's workload: the instrument run by the image's own vLLM, on a CPU.

Shipped in the harness wheel as data and mounted read-only at /opt/harness-selftest by the
image gate's two controls (`harness selftest --image-gate CAMPAIGN`), inside the image the
operator's campaign pins, with the instrument mounted and on PYTHONPATH as in every
instrumented control. Standard library only, like the instrument: it runs under the
image's Python, with whatever vLLM the image holds (in the rehearsal image, the engine
double standing in for it).

What it does, in the order the engine does it:
1. vLLM's own `load_general_plugins()` discovers the observer through its entry point in the
   mounted instrument and calls `register()`; nothing here installs the trace.
2. `VllmConfig()` on the ROCm platform (vLLM's own detection, through a stand-in `amdsmi`
   for the absent GPU): its first `__post_init__` runs the platform defaults hook.
3. The start-up capture the plug-in makes when `EngineCore._initialize_kv_caches` returns
   (KV-cache sizing needs a GPU: that one engine step is the part stood in).
4. `--engine-core multiprocess` (the seed's layout): the second `__post_init__` the engine
   core runs after its handshake. `--engine-core in-process`: none (the paired control).
5. At that capture the plug-in asks the engine core's executor for each worker's start-up
   (a stand-in `uni` executor: one worker sharing the config, a single-GPU host's layout);
   the first step writes the engine core's and the worker's generation, and the front-end
   (the driver's `observe_frontend`, on the same object) is observed around it.

It never judges: the harness's post-steps do, after the container exits. It writes
scenario.json beside the observations (which vLLM ran, from where, which plug-ins its
loader saw, and whether vLLM's files hash as its RECORD says: recorded, not judged, since
the pinned image is the engine under test whatever it holds) and exits 0 when the scenario
ran, 1 when it could not.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import json
import os
import sys
import types
from typing import Any

# The vLLM files whose bytes decide the scenario: hashed against vLLM's RECORD, if it has one.
CHECKED = ("vllm/platforms/rocm.py", "vllm/config/vllm.py", "vllm/config/compilation.py",
           "vllm/plugins/__init__.py")
PLUGIN_GROUP = "vllm.general_plugins"


def fail(message: str) -> int:
    print(f"image-scenario: {message}", file=sys.stderr, flush=True)
    return 1


class AmdSmiStandInError(Exception):
    """The stand-in's error type; vllm.platforms.rocm imports it as AmdSmiException."""


def install_amdsmi_standin() -> None:
    """Put a small `amdsmi` in sys.modules: one GPU handle reporting gfx1100 (the product's
    host class), every other query raising. It stands in for absent hardware only, so
    vLLM's own platform detection picks ROCm on a CPU; no vLLM code is replaced."""
    mod = types.ModuleType("amdsmi")
    mod.AmdSmiException = AmdSmiStandInError
    mod.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0)
    mod.amdsmi_init = lambda *args, **kwargs: None
    mod.amdsmi_shut_down = lambda *args, **kwargs: None
    mod.amdsmi_get_processor_handles = lambda: ["stand-in-gpu-0"]
    mod.amdsmi_get_gpu_asic_info = lambda handle: {"target_graphics_version": "gfx1100"}

    def unavailable(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise AmdSmiStandInError(f"{name}: not available in the image gate's stand-in")
        return call

    for name in ("amdsmi_get_gpu_device_uuid", "amdsmi_get_gpu_memory_total",
                 "amdsmi_topo_get_link_type", "amdsmi_topo_get_numa_node_number"):
        setattr(mod, name, unavailable(name))
    sys.modules["amdsmi"] = mod


def record_check() -> dict[str, str]:
    """Each checked file: 'ok', or why its bytes are not those vLLM's RECORD lists."""
    try:
        files = {str(f): f for f in importlib.metadata.distribution("vllm").files or []}
    except importlib.metadata.PackageNotFoundError:
        return {rel: "vllm has no installed distribution metadata" for rel in CHECKED}
    out = {}
    for rel in CHECKED:
        entry = files.get(rel)
        if entry is None or entry.hash is None:
            out[rel] = "not in vllm's RECORD"
            continue
        try:
            with open(entry.locate(), "rb") as f:
                digest = hashlib.new(entry.hash.mode, f.read()).digest()
        except OSError as e:
            out[rel] = f"unreadable: {e.strerror or e}"
            continue
        got = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        out[rel] = "ok" if got == entry.hash.value else f"hash {got} != RECORD {entry.hash.value}"
    return out


def plugin_names() -> list[str]:
    """The entry points of vLLM's general plug-in group that this interpreter sees."""
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP)})


class StandInWorker:
    """The worker object vLLM mixes the extension into; only what the extension reads."""

    rank = 0

    def __init__(self, config: Any) -> None:
        self.vllm_config = config

    def execute_model(self, *args: Any, **kwargs: Any) -> None:
        return None


class StandInExecutor:
    """The engine core's `uni` executor: its one worker in this process, sharing the config
    (a single-GPU ROCm host's layout); what the instrument calls of it."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def collective_rpc(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        return [getattr(self.worker, method)()]

    def execute_model(self, *args: Any, **kwargs: Any) -> Any:
        return self.worker.execute_model(*args, **kwargs)


def run(engine_core: str, out: str) -> dict[str, Any]:
    import vllm
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    import harness_observer.plugin as plugin
    from harness_observer import driver, trace

    if trace.tracer() is None:
        raise RuntimeError("load_general_plugins() did not load the observer plug-in")
    from vllm.config import VllmConfig
    from vllm.platforms import current_platform

    cfg = VllmConfig()
    worker = type("Worker", (plugin.ObserverExtension, StandInWorker), {})(cfg)
    engine = types.SimpleNamespace(vllm_config=cfg, model_executor=StandInExecutor(worker))
    plugin._capture_startup(engine)  # the engine core's start-up, and its worker's
    if engine_core == "multiprocess":
        cfg.__post_init__()  # what EngineCore runs after the handshake
    llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(vllm_config=cfg))
    driver.observe_frontend(out, llm, "startup", "LLM() returned (stand-in)")
    engine.model_executor.execute_model()  # the first step: engine core, then the worker
    driver.observe_frontend(out, llm, "generation", "LLM.generate() returned (stand-in)")
    platform = type(current_platform)
    written = sorted(n for n in os.listdir(out) if n.endswith(".json"))
    return {"vllm": str(getattr(vllm, "__version__", "unknown")), "vllm_file": vllm.__file__,
            "platform": f"{platform.__module__}.{platform.__qualname__}",
            "plugins": plugin_names(), "observer_file": plugin.__file__,
            "written": written, "custom_ops": list(cfg.compilation_config.custom_ops),
            "engine_core": engine_core}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image_scenario.py")
    parser.add_argument("--engine-core", choices=("multiprocess", "in-process"),
                        default="multiprocess")
    args = parser.parse_args(argv)
    from harness_observer import interface  # the mounted instrument, as every import here

    out = os.environ.get(interface.ENV_OBSERVATIONS_DIR)
    if not out or not os.path.isdir(out):
        return fail(f"{interface.ENV_OBSERVATIONS_DIR} must name the observations folder")
    if "amdsmi" in sys.modules or os.environ.get("VLLM_TARGET_DEVICE"):
        return fail("run in a fresh interpreter without VLLM_TARGET_DEVICE")
    install_amdsmi_standin()
    try:
        result = run(args.engine_core, out)
    except Exception as e:  # the scenario could not run: say why, the gate fails on exit 1
        return fail(f"{type(e).__name__}: {e}")
    result["record"] = record_check()
    result["python"] = sys.version.split()[0]
    with open(os.path.join(out, "scenario.json"), "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

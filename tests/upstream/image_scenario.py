"""The image gate's workload: the instrument run by real vLLM inside the pinned image, on a CPU.

Run by the harness as the command of controls/image-gate-vllm*.yaml, inside the rehearsal
image, with the upstream tier's vLLM (.upstream-venv, read-only at /opt/upstream-venv), this
folder (read-only) and the instrument (read-only, on PYTHONPATH, as in every instrumented
control). Standard library only, like the instrument: it runs under the image's Python.

What it does, in the order the engine does it:
1. vLLM's own `load_general_plugins()` discovers the observer through its entry point in the
   mounted instrument and calls `register()`; nothing here installs the trace.
2. The real `VllmConfig()` on the ROCm platform (vLLM's own detection, through the amdsmi
   stand-in for the absent GPU): its first `__post_init__` runs the platform hook.
3. The start-up capture the plug-in makes when `EngineCore._initialize_kv_caches` returns
   (KV-cache sizing needs a GPU: that one engine step is the part stood in).
4. `--engine-core multiprocess` (the seed's layout): the second `__post_init__` the engine
   core runs after its handshake. `--engine-core in-process`: none (the paired control).
5. At that capture the plug-in asks the engine core's executor for each worker's start-up
   (a stand-in `uni` executor: one worker sharing the config, a single-GPU host's layout);
   the first step writes the engine core's and the worker's generation, and the front-end
   (the driver's `observe_frontend`, on the same object) is observed around it.

It never judges: the harness's post-steps do, after the container exits. It writes
scenario.json beside the observations (which vLLM ran, from where, and that its files hash
as the wheel's RECORD says) and exits 0 when the scenario ran, 1 when it could not.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import json
import os
import site
import sys
import types
from typing import Any

from amdsmi_standin import install_amdsmi_standin  # this folder: the script's own

# The vLLM files whose bytes decide the scenario: hashed against the wheel's RECORD.
CHECKED = ("vllm/platforms/rocm.py", "vllm/config/vllm.py", "vllm/config/compilation.py",
           "vllm/plugins/__init__.py")


def fail(message: str) -> int:
    print(f"image-scenario: {message}", file=sys.stderr, flush=True)
    return 1


def use_mounted_vllm(site_dir: str) -> None:
    """The mounted vLLM ahead of anything the image has (the rehearsal image's engine
    double included); its .pth files are processed as a venv's would be."""
    sys.path.insert(0, site_dir)
    site.addsitedir(site_dir)


def record_check() -> dict[str, str]:
    """Each checked file: 'ok', or why its bytes are not the wheel's."""
    files = {str(f): f for f in importlib.metadata.distribution("vllm").files or []}
    out = {}
    for rel in CHECKED:
        entry = files.get(rel)
        if entry is None or entry.hash is None:
            out[rel] = "not in the wheel's RECORD"
            continue
        with open(entry.locate(), "rb") as f:
            digest = hashlib.new(entry.hash.mode, f.read()).digest()
        got = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        out[rel] = "ok" if got == entry.hash.value else f"hash {got} != RECORD {entry.hash.value}"
    return out


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
    from vllm.plugins import load_general_plugins, load_plugins_by_group

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
    return {"vllm": vllm.__version__, "vllm_file": vllm.__file__,
            "platform": f"{platform.__module__}.{platform.__qualname__}",
            "plugins": sorted(load_plugins_by_group("vllm.general_plugins")),
            "observer_file": plugin.__file__, "observations": written,
            "custom_ops": list(cfg.compilation_config.custom_ops), "engine_core": engine_core}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image_scenario.py")
    parser.add_argument("--engine-core", choices=("multiprocess", "in-process"),
                        default="multiprocess")
    parser.add_argument("--site", default=os.environ.get("HARNESS_UPSTREAM_SITE"),
                        help="a mounted venv's site-packages (default $HARNESS_UPSTREAM_SITE; "
                             "none: the image's own vLLM)")
    args = parser.parse_args(argv)
    out = os.environ.get("HARNESS_OBSERVATIONS_DIR")
    if not out or not os.path.isdir(out):
        return fail("HARNESS_OBSERVATIONS_DIR must name the observations folder")
    if args.site and not os.path.isdir(args.site):
        return fail(f"the mounted vLLM site-packages is not a folder: {args.site!r}")
    if "amdsmi" in sys.modules or os.environ.get("VLLM_TARGET_DEVICE"):
        return fail("run in a fresh interpreter without VLLM_TARGET_DEVICE")
    if args.site:  # without one, the image's own vLLM is the one tested
        use_mounted_vllm(args.site)
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
    if args.site and not result["vllm_file"].startswith(os.path.realpath(args.site) + os.sep):
        return fail(f"vllm was imported from {result['vllm_file']}, not the mounted venv")
    if any(state != "ok" for state in result["record"].values()):
        return fail(f"vLLM's files are not the wheel's: {result['record']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

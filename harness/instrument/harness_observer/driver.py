"""The offline workload: `python3 -m harness_observer.driver --model PATH --max-tokens N`.

Starts `LLM(model, **engine_args)` with the observer as worker extension (the engine core
and each worker then write their own observations: plugin.py), observes the front-end's
own configuration once `LLM(...)` returned and again once the first generation returned,
and generates N tokens. The driver never judges: the finalizer does, after the container
exits. Exit 0: the workload ran (observations may
still be missing, which the finalizer refuses); 2: bad arguments; 1: the engine failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from . import trace
from .interface import (
    ENGINE_CORE,
    ENGINE_SECRET_PREFIX,
    ENV_ENGINE_ARGS,
    FRONTEND,
    MAX_RANK,
    PHASES,
    WORKER,
    document_name,
)
from .plugin import EXTENSION
from .snapshot import ENV_OUT, observation, write_document

PLUGIN_NAME = "harness_observer"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m harness_observer.driver")
    parser.add_argument("--model", required=True, help="model path inside the container")
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens to generate")
    parser.add_argument("--prompt", default="The capital of France is")
    parser.add_argument("--engine-args-json", default=os.environ.get(ENV_ENGINE_ARGS, "{}"),
                        help="JSON object of LLM(...) keyword arguments "
                             "(default: $HARNESS_ENGINE_ARGS, set from the control's `engine:`)")
    return parser.parse_args(argv)


# Must match harness.vector: secret-looking engine values arrive as a reference to an env
# var that docker was given by name only, so their clear text is in no argv and no evidence.
SECRET_REF = "$harness_secret_env"


def resolve_secrets(value: Any, environ: Mapping[str, str]) -> Any:
    """Replace each {SECRET_REF: NAME} (at any depth) by the JSON value of $NAME."""
    if isinstance(value, dict):
        if set(value) == {SECRET_REF}:
            name = value[SECRET_REF]
            if not isinstance(name, str) or not name.startswith(ENGINE_SECRET_PREFIX):
                raise ValueError(f"{SECRET_REF} must name a {ENGINE_SECRET_PREFIX}* variable")
            if name not in environ:
                raise ValueError(f"the engine secret {name} is not in the environment")
            try:
                return json.loads(environ[name])
            except ValueError:
                raise ValueError(f"the engine secret {name} is not JSON") from None
        return {k: resolve_secrets(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_secrets(v, environ) for v in value]
    return value


def engine_args(text: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The control's engine arguments; the worker extension is the driver's own."""
    args = resolve_secrets(json.loads(text), os.environ if environ is None else environ)
    if not isinstance(args, dict):
        raise ValueError("--engine-args-json must be a JSON object")
    if args.get("worker_extension_cls", EXTENSION) != EXTENSION:
        raise ValueError("worker_extension_cls is taken by the observer")
    if "model" in args:
        raise ValueError("give the model with --model, not in --engine-args-json")
    return {**args, "worker_extension_cls": EXTENSION}


def plugins_env(value: str | None) -> str | None:
    """VLLM_PLUGINS filters plugins by name; keep ours in when the control set a filter."""
    if value is None:
        return None
    names = [n for n in value.split(",") if n]
    return ",".join([*names, PLUGIN_NAME]) if PLUGIN_NAME not in names else value


def frontend_config(llm: Any) -> Any:
    """The configuration the front-end holds: `LLM.llm_engine.vllm_config`."""
    return llm.llm_engine.vllm_config


def observe_frontend(directory: str, llm: Any, phase: str, hook: str) -> None:
    """Write the front-end's observation; a failure is said, recorded in the trace as the
    instrument's error (the finalizer refuses it), and leaves the document unwritten."""
    try:
        doc = observation(phase, frontend_config(llm), rank=0, kind=FRONTEND, hook=hook)
        write_document(directory, document_name(FRONTEND, phase), doc)
    except Exception as e:
        say(f"front-end {phase} observation failed: {type(e).__name__}: {e}")
        (trace.tracer() or trace.Tracer(directory)).error(f"front-end {phase} observation", e)


def expected_documents(llm: Any) -> list[str]:
    """Every process's documents, for the workload's own log: the engine core's, the
    front-end's, and one pair per worker of vLLM's `world_size` (the finalizer decides
    for itself which it needs; this only says what is there)."""
    try:
        workers = int(frontend_config(llm).parallel_config.world_size)
    except Exception:
        workers = 1
    ranks = range(min(workers, MAX_RANK + 1))
    kinds = [(ENGINE_CORE, 0), (FRONTEND, 0)] + [(WORKER, rank) for rank in ranks]
    return [document_name(kind, phase, rank) for kind, rank in kinds for phase in PHASES]


def process_age() -> float | None:
    """Seconds since this process started (its start time in /proc against the uptime):
    start-up to tokens, measured the same way with or without the observer (make bench)."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return round(uptime - started / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def say(message: str) -> None:
    print(f"harness_observer: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        kwargs = engine_args(args.engine_args_json)
    except ValueError as e:
        say(f"invalid engine arguments: {e}")
        return 2
    if args.max_tokens < 1:
        say("--max-tokens must be at least 1")
        return 2
    directory = os.environ.get(ENV_OUT)
    if not directory or not os.path.isdir(directory):
        say(f"{ENV_OUT} must name an existing folder")
        return 2
    filtered = plugins_env(os.environ.get("VLLM_PLUGINS"))
    if filtered is not None:
        os.environ["VLLM_PLUGINS"] = filtered

    from vllm import LLM, SamplingParams

    llm = LLM(model=args.model, **kwargs)
    observe_frontend(directory, llm, "startup", "LLM() returned")
    outputs = llm.generate([args.prompt], SamplingParams(max_tokens=args.max_tokens,
                                                         temperature=0.0))
    observe_frontend(directory, llm, "generation", "LLM.generate() returned")
    for out in outputs:
        completion = out.outputs[0]
        print(json.dumps({"prompt": out.prompt, "text": completion.text,
                          "tokens": len(completion.token_ids),
                          "since_start_s": process_age()}), flush=True)
    for name in expected_documents(llm):
        state = "written" if os.path.exists(os.path.join(directory, name)) else "MISSING"
        say(f"{name}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

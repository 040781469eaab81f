"""The engine workload without the observer, for `make bench` (benchmarks/bench_engine.py).

    python3 engine_bare.py --model PATH --max-tokens N --engine-args-json '{...}'

What `harness_observer.driver` does, less the observer: the same `LLM(model=..., **engine
args)`, the same `generate` of the same prompt with `SamplingParams(max_tokens=N,
temperature=0)`, and the same JSON line on stdout, with `since_start_s` taken the same way
(this process's start time in /proc against the uptime). No worker extension, no
observations, no instrument on PYTHONPATH (so vLLM finds no harness plug-in). Standard
library and vLLM only: it runs inside the engine image, mounted read-only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def process_age() -> float | None:
    """Seconds since this process started; the same arithmetic as the driver's."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return round(uptime - started / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 engine_bare.py")
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--prompt", default="The capital of France is")
    parser.add_argument("--engine-args-json", default="{}")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    kwargs = json.loads(args.engine_args_json)
    if not isinstance(kwargs, dict):
        print("engine_bare: --engine-args-json must be a JSON object", file=sys.stderr)
        return 2

    from vllm import LLM, SamplingParams

    llm = LLM(model=args.model, **kwargs)
    outputs = llm.generate([args.prompt], SamplingParams(max_tokens=args.max_tokens,
                                                         temperature=0.0))
    for out in outputs:
        completion = out.outputs[0]
        print(json.dumps({"prompt": out.prompt, "text": completion.text,
                          "tokens": len(completion.token_ids),
                          "since_start_s": process_age()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

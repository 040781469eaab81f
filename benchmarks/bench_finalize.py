"""The Gate-0 finalizer on large observations: 10k, 100k and 1M fields.

Documents follow harness.observation/v1 (harness/instrument/harness_observer/encode.py):
a mix of ints, floats, strings, lists, tuples, typed enums and `$repr`s, with one field in
a thousand differing. Three figures per size: `judge` alone on parsed documents (the
comparison), reading + judging in-process, and the `harness finalize` command end to end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from benchmarks.common import Config, median

MODE = {"$enum": "vllm.config.compilation.CompilationMode", "name": "VLLM_COMPILE", "value": 3}


def _value(i: int, phase: str):
    kind = i % 7
    if kind == 0:
        return i
    if kind == 1:
        return i / 7.0
    if kind == 2:
        return f"value-{i}"
    if kind == 3:
        return [i, i + 1, "x"]
    if kind == 4:
        return {"$tuple": [i, str(i)]}
    if kind == 5:
        return MODE
    return {"$repr": f"<Obj {i}>", "type": "vllm.Obj"}


def document(n: int, phase: str) -> dict:
    fields = {}
    for i in range(n):
        value = _value(i, phase)
        if phase == "generation" and i % 1000 == 999:
            value = ["changed", i]
        fields[f"layer{i // 1000}.block{i % 1000}.param{i % 7}"] = value
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"role": "EngineCore", "rank": 0, "pid": 659},
            "source": {"seal": "sha256:s", "engine": "vllm@x", "image": "sha256:i"},
            "complete": True, "fields": fields}


def _size_name(n: int) -> str:
    return f"{n // 1000}k" if n < 1_000_000 else f"{n // 1_000_000}m"


def run_finalize(cfg: Config) -> dict[str, float]:
    from harness.judge.finalize.documents import MAX_BYTES, read_document
    from harness.judge.finalize.pins import load_pins
    from harness.judge.finalize.rules import judge

    sizes = [10_000, 100_000] if cfg.quick else [10_000, 100_000, 1_000_000]
    folder = cfg.work / "finalize"
    folder.mkdir(parents=True)
    pins = load_pins()
    out: dict[str, float] = {}
    for n in sizes:
        s_doc, g_doc = document(n, "startup"), document(n, "generation")
        s_path, g_path = folder / f"s{n}.json", folder / f"g{n}.json"
        s_path.write_text(json.dumps(s_doc))
        g_path.write_text(json.dumps(g_doc))
        reps = 3 if n <= 10_000 or (n <= 100_000 and not cfg.quick) else 1
        # Past the observation read limit the harness refuses the file (exit 2) by design:
        # only the judge itself is timed there, on the documents in memory.
        readable = max(s_path.stat().st_size, g_path.stat().st_size) <= MAX_BYTES
        if not readable:
            cfg.notes.append(f"finalize: {_size_name(n)} fields is "
                             f"{s_path.stat().st_size} bytes, over the {MAX_BYTES}-byte "
                             "observation limit; only the in-memory judge is timed")
        judged, whole, cli = [], [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            verdict = judge(s_doc, g_doc, pins=pins)
            judged.append(time.perf_counter() - t0)
            if not readable:
                continue
            t0 = time.perf_counter()
            judge(read_document(s_path), read_document(g_path), pins=pins)
            whole.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "harness", "finalize", "--startup",
                                str(s_path), "--generation", str(g_path)],
                               capture_output=True, text=True)
            cli.append(time.perf_counter() - t0)
            if r.returncode != 1 or verdict["verdict"] != "refused":
                raise RuntimeError(f"finalize should refuse: {r.returncode} {r.stderr[-500:]}")
        if len(verdict["differences"]) != n // 1000:
            raise RuntimeError("the finalizer missed planted differences")
        name = _size_name(n)
        out[f"finalize_{name}_s"] = round(median(judged), 3)
        if readable:
            out[f"finalize_read_{name}_s"] = round(median(whole), 3)
            out[f"finalize_cli_{name}_s"] = round(median(cli), 3)
        s_path.unlink()
        g_path.unlink()
    per_field = {n: out[f"finalize_{_size_name(n)}_s"] / n for n in sizes}
    out["finalize_scaling"] = round(per_field[sizes[-1]] / per_field[sizes[0]], 2)
    return out

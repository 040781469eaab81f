"""The real vLLM engine (issue 21, item 9): what the observer costs the engine's start-up,
and what `harness run` costs around a real engine run.

Three sides, alternated round by round (each side first in turn), `ENGINE_BENCH_PAIRS`
rounds (5; 2 with --quick), after one unmeasured `harness run` that gives the vector and
warms the page cache:

- `harness`: `harness run` of engine-cpu-mp (lock, witness, seal, post-steps), its wall;
- `observed`: the harness's own docker vector of that run, made re-runnable
  (`bench_overhead._replay_argv`): instrument mounted, HARNESS_* set, the driver;
- `bare`: the same vector without the observer (`bare_argv`): no instrument mount, no
  observations mount, no HARNESS_* env, the instrument off PYTHONPATH, and
  benchmarks/engine_bare.py (the same LLM(...) and generate, standard library + vLLM) as
  the command.

`engine_observer_cost_pct` compares the `since_start_s` each workload prints (its own
process's age when the tokens are out) of `observed` against `bare`; `engine_run_ratio`
the wall of `harness` against `observed`. Each is the median of the per-round ratios.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from benchmarks.bench_overhead import _harness_once, _replay_argv, _stage
from benchmarks.common import (
    REPO,
    Config,
    Project,
    alternate,
    check,
    median,
    mount_options,
    parse_time,
)
from harness.instrument.harness_observer.interface import (
    ENV_ENGINE_ARGS,
    INSTRUMENT_TARGET,
    OBSERVATIONS_TARGET,
)

CONTROL = "engine-cpu-mp"  # vLLM's default layout: front-end, EngineCore, worker
ENGINE_VENV = REPO / ".engine-venv"
VENV_STAMP = ENGINE_VENV / ".harness-engine-lock"  # written by scripts/engine-venv.sh
MODEL = REPO / "controls" / "models" / "tiny-llama"
BARE_SCRIPT = REPO / "benchmarks" / "engine_bare.py"
BARE_TARGET = "/opt/bench-engine/engine_bare.py"
PAIRS_ENV = "ENGINE_BENCH_PAIRS"
HARNESS_ENV = "HARNESS_"
# docker run options that take no value (the others are `--opt value` or `--opt=value`)
NO_VALUE = frozenset({"--rm", "--init", "--read-only", "--privileged", "-i", "-t",
                      "--interactive", "--tty", "-d", "--detach"})


# ---- pure ----------------------------------------------------------------------------------

def image_index(argv: list[str]) -> int:
    """Where the image is in a `docker run` argv: the first word that is no option's."""
    i = 2
    while i < len(argv) and argv[i].startswith("-"):
        i += 1 if "=" in argv[i] or argv[i] in NO_VALUE else 2
    if i >= len(argv):
        raise ValueError("no image in the docker vector")
    return i


def _mount_target(arg: str) -> str | None:
    parts = mount_options(arg)
    return parts.get("target") or parts.get("dst") or parts.get("destination")


def _option(command: list[str], name: str) -> str | None:
    """The value of `--name value` or `--name=value` in a workload's command."""
    for i, word in enumerate(command):
        if word == name and i + 1 < len(command):
            return command[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def bare_argv(argv: list[str], script: Path) -> list[str]:
    """The harness's docker vector without the observer: the instrument and observations
    mounts and every HARNESS_* variable dropped, the instrument taken off PYTHONPATH,
    `script` mounted read-only where the instrument was, and the driver's command replaced
    by the bare workload with the same model, tokens, prompt and engine arguments. Every
    other option (limits, network, labels, name, cid file, --rm) is kept as given."""
    at = image_index(argv)
    opts, image, command = argv[:at], argv[at], argv[at + 1:]
    if "harness_observer.driver" not in command:
        raise ValueError(f"not the observer's driver: {command}")
    out: list[str] = list(opts[:2])
    engine_args = "{}"
    i = 2
    while i < len(opts):
        word = opts[i]
        if "=" in word or word in NO_VALUE:
            out.append(word)
            i += 1
            continue
        value = opts[i + 1] if i + 1 < len(opts) else ""
        i += 2
        if word in ("--env", "-e"):
            name, _, text = value.partition("=")
            if name == ENV_ENGINE_ARGS:
                engine_args = text
            if name.startswith(HARNESS_ENV):
                continue
            if name == "PYTHONPATH":
                kept = [p for p in text.split(":") if p and p != INSTRUMENT_TARGET]
                if not kept:
                    continue
                value = "PYTHONPATH=" + ":".join(kept)
        elif word == "--mount":
            target = _mount_target(value)
            if target == OBSERVATIONS_TARGET:
                continue
            if target == INSTRUMENT_TARGET:
                value = f"type=bind,source={script},target={BARE_TARGET},readonly"
        out += [word, value]
    bare = ["python3", BARE_TARGET, "--model", _option(command, "--model") or "/models/model",
            "--max-tokens", _option(command, "--max-tokens") or "8",
            "--engine-args-json", engine_args]
    prompt = _option(command, "--prompt")
    if prompt is not None:
        bare += ["--prompt", prompt]
    return [*out, image, *bare]


def workload_line(stdout: str) -> dict:
    """The workload's JSON line (the last one, among vLLM's own log lines on the same
    stream); an error when it printed none."""
    found = None
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "since_start_s" in doc:
            found = doc
    if found is None:
        raise RuntimeError("the workload printed no JSON line with since_start_s: "
                           f"{stdout[-1000:]!r}")
    return found


def since_start(stdout: str) -> float:
    """The workload's own age when its tokens were out (`since_start_s`, seconds since its
    process started); an error when it printed none, gave no age or no tokens."""
    found = workload_line(stdout)
    age = found["since_start_s"]
    if isinstance(age, bool) or not isinstance(age, int | float) or age <= 0:
        raise RuntimeError(f"the workload's since_start_s is {age!r}")
    if not found.get("tokens"):
        raise RuntimeError(f"the workload generated no tokens: {found!r}")
    return float(age)


def pair_ratio(b: list[float], a: list[float]) -> float:
    """The median of the per-round ratios b/a (round i of one side against round i of the
    other, so that the load of the moment falls on both)."""
    if not a or len(a) != len(b):
        raise ValueError(f"{len(b)} against {len(a)} measurements")
    return median([y / x for x, y in zip(a, b, strict=True)])


def cost_pct(ratio: float) -> float:
    """(B - A) / A in %, from the median ratio B/A (the median of the per-round (B-A)/A)."""
    return (ratio - 1.0) * 100.0


def pairs(environ: Mapping[str, str], quick: bool) -> int:
    """Rounds to run: $ENGINE_BENCH_PAIRS, else 5 (2 with --quick)."""
    text = environ.get(PAIRS_ENV)
    if text is None or text == "":
        return 2 if quick else 5
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{PAIRS_ENV}={text!r} is not a whole number") from None
    if n < 1:
        raise ValueError(f"{PAIRS_ENV} must be at least 1, not {n}")
    return n


# ---- prerequisites ----------------------------------------------------------------------

def missing_engine() -> list[str]:
    """What of the engine tier is not there: its venv, its model, its pinned image."""
    missing = []
    if not VENV_STAMP.is_file():
        missing.append(f"the engine venv {ENGINE_VENV}")
    if not (MODEL / "model.safetensors").is_file():
        missing.append(f"the model {MODEL}")
    r = subprocess.run([sys.executable, "-m", "harness", "images",
                        "verify", "engine", "--images-lock", str(REPO / "images.lock")],
                       capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        missing.append(f"the engine image pinned in images.lock "
                       f"({(r.stdout.strip() or r.stderr.strip())[-300:]})")
    return missing


# ---- the benchmark ------------------------------------------------------------------------

def _campaign(proj: Project) -> Path:
    """A campaign of the project's own engine-cpu-mp control, with a lock of its own (the
    operator's ~/gpu.lock stays free) and the project's images.lock and mount root."""
    camp = proj.campaign("engine-bench", [CONTROL])
    with open(camp, "a") as f:
        f.write(f"images_lock: {REPO / 'images.lock'}\ncontrols_dir: {REPO / 'controls'}\n"
                f"mount_roots: [{json.dumps(str(REPO))}]\n")
    return camp


def _docker(argv: list[str], what: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    check(r, what)
    return dt, r.stdout


def _note(cfg: Config, run_dir: Path, what: str) -> None:
    """A run the harness did not accept (say SEAL-CHANGED while someone edits the source)
    still ran its container; it is timed, and named in the environment."""
    rec = json.loads((run_dir / "run.json").read_text())
    if rec["status"] != "accepted":
        # the scratch folder goes with the benchmark: keep the log's end in the note
        err = run_dir / "logs" / "stderr.log"
        tail = err.read_text(errors="replace").splitlines()[-5:] if err.is_file() else []
        cfg.notes.append(f"engine: {what} run {run_dir.name} {rec['status']}: "
                         f"{rec['reasons']}; stderr ends: {tail}")


def run_engine(cfg: Config) -> dict[str, float]:
    missing = missing_engine()
    if missing:
        raise RuntimeError("the engine benchmark cannot run: missing "
                           + "; ".join(missing) + ". Run `make engine` first.")
    n = pairs(os.environ, cfg.quick)
    proj = Project(cfg.work / "engine", cfg.image_id)
    argv = proj.run_argv(_campaign(proj))
    # The warm-up: the vector, a warm page cache; unmeasured. Its refusals are noted from
    # its run.json (_harness_once's own note names the trivial-container benchmark).
    _harness_once(argv, [], [])
    first = proj.run_dirs()
    if not first:
        raise RuntimeError("the warm-up `harness run` sealed no run folder")
    _note(cfg, first[0], "warm-up")
    vector_of = first[0]
    marks: list[dict] = []
    seen = set(first)
    inside: list[float] = []  # the engine's since_start_s in the harness's own runs
    outside: list[float] = []  # harness wall minus its container's run
    count = [0]

    def harness() -> float:
        dt = _harness_once(argv, marks, [])
        for d in sorted(set(proj.run_dirs()) - seen):
            seen.add(d)
            _note(cfg, d, "measured")
            o = json.loads((d / "outcome.json").read_text())
            if o.get("container_started_at") and o.get("container_finished_at"):
                outside.append(dt - (parse_time(o["container_finished_at"])
                                     - parse_time(o["container_started_at"])))
            try:
                inside.append(since_start((d / "logs" / "stdout.log").read_text()))
            except (OSError, RuntimeError) as e:
                cfg.notes.append(f"engine: {d.name}: {e}")
        return dt

    observed_age: list[float] = []
    bare_age: list[float] = []
    bare_wall: list[float] = []
    texts: set[str] = set()  # greedy, seed 0: both workloads must generate the same text

    def observed() -> float:
        count[0] += 1
        dt, out = _docker(_replay_argv(vector_of, count[0]), "docker run (harness vector)")
        observed_age.append(since_start(out))
        texts.add(workload_line(out)["text"])
        return dt

    def bare() -> float:
        count[0] += 1
        dt, out = _docker(bare_argv(_replay_argv(vector_of, count[0]), BARE_SCRIPT),
                          "docker run (bare engine)")
        bare_age.append(since_start(out))
        bare_wall.append(dt)
        texts.add(workload_line(out)["text"])
        return dt

    h, v, _ = alternate(n, [harness, observed, bare])
    if len(texts) != 1:
        cfg.notes.append(f"engine: the bare and observed workloads generated different "
                         f"texts: {sorted(texts)}")
    cfg.notes.append(f"engine: rounds since_start_s observed {observed_age}, bare {bare_age}, "
                     f"harness {inside}")
    ratio = pair_ratio(observed_age, bare_age)
    out = {
        "engine_observer_cost_pct": round(cost_pct(ratio), 2),
        "engine_observer_ratio": round(ratio, 4),
        "engine_observed_since_start_s": round(median(observed_age), 3),
        "engine_bare_since_start_s": round(median(bare_age), 3),
        "engine_harness_since_start_s": round(median(inside), 3),
        "engine_run_ratio": round(pair_ratio(h, v), 4),
        "engine_run_harness_s": round(median(h), 3),
        "engine_run_bare_s": round(median(v), 3),
        "engine_run_overhead_s": round(median(h) - median(v), 3),
        "engine_run_outside_container_s": round(median(outside), 3),
        "engine_bare_wall_s": round(median(bare_wall), 3),
        "engine_preflight_lock_ms": _stage(marks, "run", "lock-acquired"),
        "engine_post_steps_ms": _stage(marks, "lock-released", "post-step-done"),
        "engine_seal_ms": _stage(marks, "post-step-done", "sealed"),
        "engine_pairs": n,
    }
    return {k: x for k, x in out.items() if not math.isnan(x)}  # none of a kind seen

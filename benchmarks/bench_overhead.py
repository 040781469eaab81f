"""`harness run` of a trivial container against bare `docker run --rm`, and where the
difference goes; the handoff between short controls in one night.

Stage times come from two sources, named in the metric:
- `overhead_*_ms`: the JSON-lines events (`at` stamps) of the measured `harness run`s,
  relative to the moment the benchmark spawned the process;
- `stage_*_ms`: the pipeline's own functions called in-process, timed with perf_counter.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import (
    Config,
    Project,
    alternate,
    check,
    events,
    median,
    mount_options,
    parse_time,
)
from harness.instrument.harness_observer.interface import OBSERVATIONS_TARGET

TRIVIAL = 'command: ["true"]\ntimeout: 1m\n'


def _harness_once(argv: list[str], marks: list[dict], notes: list[str]) -> float:
    t_wall = time.time()
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode == 1:  # refused, e.g. HOST-DRIFT while other work touches the engine
        notes.append(f"overhead: a run was refused: {r.stdout.strip()}")
    else:
        check(r, "harness run")
    at = {}
    for e in events(r.stderr):
        at.setdefault(e["event"], parse_time(e["at"]))
        if e["event"] == "post-step-done":
            at["post-step-done"] = parse_time(e["at"])  # the last one
    at["spawn"], at["exit"] = t_wall, t_wall + dt
    marks.append(at)
    return dt


def _stage(marks: list[dict], a: str, b: str) -> float:
    vals = [m[b] - m[a] for m in marks if a in m and b in m]
    return round(median(vals) * 1000, 1)


def _replay_argv(run_dir: Path, n: int) -> list[str]:
    """The harness's own docker vector, made re-runnable: a fresh name and cid file, --rm,
    and a fresh observations folder (the sealed run's own was removed when empty)."""
    argv = json.loads((run_dir / "docker-vector.json").read_text())["argv"]
    argv = list(argv)
    for i, arg in enumerate(argv):
        parts = mount_options(arg)
        if argv[i - 1] == "--mount" and parts.get("target") == OBSERVATIONS_TARGET:
            scratch = run_dir.parent.parent / "replay-out" / f"{time.time_ns()}-{n}"
            scratch.mkdir(mode=0o777, parents=True)
            scratch.chmod(0o777)
            argv[i] = arg.replace(f"source={parts['source']}", f"source={scratch}", 1)
    argv[argv.index("--name") + 1] = f"bench-replay-{time.time_ns()}-{n}"
    cid = run_dir.parent / f".replay-{time.time_ns()}.cid"
    argv[argv.index("--cidfile") + 1] = str(cid)
    return [*argv[:2], "--rm", *argv[2:]]


def run_overhead(cfg: Config) -> dict[str, float]:
    proj = Project(cfg.work / "overhead", cfg.image_id)
    proj.control("trivial", TRIVIAL)
    camp = proj.campaign("overhead", ["trivial"])
    argv = proj.run_argv(camp)
    bare = ["docker", "run", "--rm", cfg.image_id, "true"]
    marks: list[dict] = []
    _harness_once(argv, [], cfg.notes)  # warm the page cache and the engine once, unmeasured
    replays = [0]

    def harness() -> float:
        return _harness_once(argv, marks, cfg.notes)

    def docker() -> float:
        t0 = time.perf_counter()
        check(subprocess.run(bare, capture_output=True), "docker run")
        return time.perf_counter() - t0

    def replay() -> float:
        replays[0] += 1
        a = _replay_argv(proj.run_dirs()[0], replays[0])
        t0 = time.perf_counter()
        check(subprocess.run(a, capture_output=True), "docker run (harness vector)")
        return time.perf_counter() - t0

    n = 10 if cfg.quick else 12
    h, d, v = alternate(n, [harness, docker, replay])
    mh, md, mv = median(h), median(d), median(v)
    ratios = [a / b for a, b in zip(h, d, strict=True)]
    out = {
        "run_overhead_ratio": round(median(ratios), 3),
        "run_overhead_ms": round((mh - md) * 1000, 1),
        "run_harness_s": round(mh, 3),
        "run_bare_s": round(md, 3),
        "run_vector_replay_ratio": round(mv / md, 3),
        "overhead_startup_ms": _stage(marks, "spawn", "run"),
        "overhead_preflight_lock_ms": _stage(marks, "run", "lock-acquired"),
        "overhead_locked_launch_ms": _stage(marks, "lock-acquired", "lock-released"),
        "overhead_post_steps_ms": _stage(marks, "lock-released", "post-step-done"),
        "overhead_seal_ms": _stage(marks, "post-step-done", "sealed"),
        "overhead_exit_ms": _stage(marks, "sealed", "exit"),
    }
    out.update(_in_process(cfg, proj, camp))
    return out


def _timeit(fn, n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return round(median(ts) * 1000, 2)


def _in_process(cfg: Config, proj: Project, camp: Path) -> dict[str, float]:
    """The pipeline's pieces timed in this process (the engine client warmed first)."""
    from benchmarks.common import rmtree
    from harness.measure import engine
    from harness.measure.host import identity
    from harness.measure.lock import GpuLock
    from harness.measure.runfolder.manifest import make_read_only, write_manifest
    from harness.measure.seal import source_seal
    from harness.measure.witness import container as container_witness
    from harness.measure.witness import launcher as launcher_witness

    engine.client()
    lock = GpuLock(proj.root / "locks" / "micro.lock", run_id="bench", timeout=10)

    def lock_cycle() -> None:
        lock.acquire()
        lock.release()

    sleeper = subprocess.Popen(["sleep", "30"])
    # A started container: the witness waits for a container still in `created`.
    cid = subprocess.run(["docker", "run", "-d", "--network", "none", cfg.image_id,
                          "sleep", "60"], capture_output=True, text=True).stdout.strip()
    inputs = [camp, proj.root / "controls" / "trivial.yaml", proj.root / "images.lock"]
    sealed = proj.run_dirs()[0]
    copies = []

    def manifest() -> None:
        dst = proj.root / f"manifest-{len(copies)}"
        copies.append(dst)
        subprocess.run(["cp", "-r", str(sealed), str(dst)], check=True)
        subprocess.run(["chmod", "-R", "u+w", str(dst)], check=True)
        (dst / "SHA256SUMS").unlink()
        t0 = time.perf_counter()
        write_manifest(dst)
        make_read_only(dst)
        times.append(time.perf_counter() - t0)

    times: list[float] = []
    try:
        out = {
            "stage_lock_ms": _timeit(lock_cycle, 20),
            "stage_image_inspect_ms": _timeit(lambda: engine.local_image(cfg.image_id), 20),
            "stage_launcher_witness_ms": _timeit(lambda: launcher_witness.collect(sleeper.pid),
                                                 20),
            "stage_container_witness_ms": _timeit(lambda: container_witness.collect(cid), 20),
            "stage_host_snapshot_ms": _timeit(identity.snapshot, 10),
            "stage_source_seal_ms": _timeit(lambda: source_seal(proj.root, inputs), 10),
            "stage_poststep_process_ms": _timeit(lambda: subprocess.run(
                [sys.executable, "-c", "import harness.judge.poststeps.exitcode"], check=True), 5),
            "stage_cli_import_ms": _timeit(lambda: subprocess.run(
                [sys.executable, "-c", "import harness.cli.commands"], check=True), 5),
            "stage_python_start_ms": _timeit(lambda: subprocess.run(
                [sys.executable, "-c", "pass"], check=True), 5),
        }
        for _ in range(10):
            manifest()
        out["stage_manifest_ms"] = round(median(times) * 1000, 2)
    finally:
        sleeper.kill()
        sleeper.wait()
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
        for c in copies:
            rmtree(c)
    return out


# ---- handoff -------------------------------------------------------------------------------

def _gaps(spans: list[tuple[float, float]]) -> list[float]:
    """Start of each container minus the finish of the one before, in start order."""
    spans = sorted(spans)
    return [b[0] - a[1] for a, b in itertools.pairwise(spans)]


def _harness_night(cfg: Config, proj: Project, camp: Path,
                   split: dict[str, list[float]] | None = None) -> list[float]:
    """Gaps between the containers of one `harness run` of the campaign. A run refused
    for another reason (say HOST-DRIFT while other work touches the engine) still has its
    container times; the refusal is noted in the environment. `split` collects where each
    gap went (`_split`)."""
    before = set(proj.run_dirs())
    r = subprocess.run(proj.run_argv(camp), capture_output=True, text=True)
    spans = []
    for d in sorted(set(proj.run_dirs()) - before):
        rec = json.loads((d / "run.json").read_text())
        if rec["status"] != "accepted":
            cfg.notes.append(f"handoff: {d.name} {rec['status']}: {rec['reasons']}")
        o = json.loads((d / "outcome.json").read_text())
        spans.append((parse_time(o["container_started_at"]),
                      parse_time(o["container_finished_at"])))
    if len(spans) < 2:
        check(r, "harness night")
    if split is not None:
        _split(events(r.stderr), sorted(spans), split)
    return _gaps(spans)


# Where a harness gap goes, from the `--json-lines` events of the run (N, then N+1):
# (metric, from, to): container N exits -> N's lock released -> N sealed -> N+1's lock
# acquired (its folder and preflight) -> N+1's `launch` (orphans, mounts, vector) -> N+1's
# container started (the docker CLI, create, start).
HANDOFF_SPLIT = (("handoff_exit_ms", "exit", "lock-released"),
                 ("handoff_seal_ms", "lock-released", "sealed"),
                 ("handoff_preflight_ms", "sealed", "next-lock-acquired"),
                 ("handoff_locked_ms", "next-lock-acquired", "next-launch"),
                 ("handoff_docker_ms", "next-launch", "next-start"))


def _split(evs: list[dict], spans: list[tuple[float, float]],
           split: dict[str, list[float]]) -> None:
    """Add each gap's pieces (HANDOFF_SPLIT) to `split`; a run whose events do not pair
    with its containers (one refused before launch, say) adds nothing."""
    per: list[dict[str, float]] = []
    for e in evs:
        if e["event"] == "run":
            per.append({})
        elif per and e["event"] not in per[-1]:
            per[-1][e["event"]] = parse_time(e["at"])
    if len(per) != len(spans):
        return
    for (start, end), m in zip(spans, per, strict=True):
        m["start"], m["exit"] = start, end
    for a, b in itertools.pairwise(per):
        at = {**a, **{f"next-{k}": v for k, v in b.items()}}
        for name, x, y in HANDOFF_SPLIT:
            if x in at and y in at:
                split.setdefault(name, []).append(at[y] - at[x])


def _bare_night(image_id: str, n: int, flags: tuple[str, ...] = ()) -> list[float]:
    """What a shell loop of `docker run` gives: the same n containers, one after another.
    `flags`: ("--network", "none") as the harness's vector has, which skips the bridge."""
    names = [f"bench-handoff-{time.time_ns()}-{i}" for i in range(n)]
    try:
        for name in names:
            check(subprocess.run(["docker", "run", *flags, "--name", name, image_id, "true"],
                                 capture_output=True), "docker run")
        r = subprocess.run(["docker", "inspect", *names], capture_output=True, text=True)
        check(r, "docker inspect")
        spans = [(parse_time(c["State"]["StartedAt"]), parse_time(c["State"]["FinishedAt"]))
                 for c in json.loads(r.stdout)]
    finally:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True)
    return _gaps(spans)


def run_handoff(cfg: Config) -> dict[str, float]:
    from benchmarks.common import GB, MB, sparse
    from harness.base.hashing import sha256_many

    n = 4 if cfg.quick else 5
    proj = Project(cfg.work / "handoff", cfg.image_id)
    names = [f"short{i}" for i in range(n)]
    for name in names:
        proj.control(name, TRIVIAL)
    camp = proj.campaign("night", names)
    # The same night with a pinned model: its files are hashed before and after each run.
    model = proj.root / "models" / "m"
    model.mkdir(parents=True)
    size = cfg.size(2 * GB, 256 * MB)
    sparse(model / "weights.bin", size)
    (model / "config.json").write_text('{"layers": 2}')
    digests = sha256_many([model / "weights.bin", model / "config.json"])
    body = (TRIVIAL + "model:\n  source: ../models/m\n  target: /models/m\n  sha256:\n"
            f"    weights.bin: {digests[model / 'weights.bin']}\n"
            f"    config.json: {digests[model / 'config.json']}\n")
    mnames = [f"model{i}" for i in range(n)]
    for name in mnames:
        proj.control(name, body)
    mcamp = proj.campaign("model-night", mnames)
    rounds = 2 if cfg.quick else 4
    h, b, bn, m = [], [], [], []
    split: dict[str, list[float]] = {}
    ratios, ratios_none = [], []  # per round: the engine's load drifts between rounds
    for i in range(rounds):  # each side first in turn, so drift in the engine hits all
        hi, bi, ni = len(h), len(b), len(bn)
        sides = [lambda: h.extend(_harness_night(cfg, proj, camp, split)),
                 lambda: b.extend(_bare_night(cfg.image_id, n)),
                 lambda: m.extend(_harness_night(cfg, proj, mcamp)),
                 lambda: bn.extend(_bare_night(cfg.image_id, n, ("--network", "none")))]
        for side in sides[i % 4:] + sides[: i % 4]:
            side()
        ratios.append(median(h[hi:]) / median(b[bi:]))
        ratios_none.append(median(h[hi:]) / median(bn[ni:]))
    out = {
        "handoff_ratio": round(median(ratios), 3),
        "handoff_s": round(median(h), 3),
        "handoff_bare_s": round(median(b), 3),
        # context: against a loop with the vector's `--network none` (no bridge to set up)
        "handoff_ratio_network_none": round(median(ratios_none), 3),
        "handoff_bare_network_none_s": round(median(bn), 3),
        "handoff_extra_s": round(median(h) - median(b), 3),
        "handoff_model_s": round(median(m), 3),
        "handoff_model_gb": round(size / GB, 2),
    }
    out.update({name: round(median(v) * 1000, 1) for name, v in split.items()})
    return out

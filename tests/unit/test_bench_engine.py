"""The pure parts of `make bench`'s engine figures (benchmarks/bench_engine.py): the bare
vector derived from the harness's own, the workload's `since_start_s` read from its stdout,
and the ratio / percentage arithmetic. No Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_engine, engine_bare
from benchmarks.bench_engine import (
    BARE_TARGET,
    bare_argv,
    cost_pct,
    image_index,
    pair_ratio,
    pairs,
    since_start,
    workload_line,
)
from benchmarks.bench_overhead import _replay_argv
from harness.instrument.harness_observer import driver

IMAGE = "sha256:" + "5f" * 32
ENGINE_ARGS = '{"dtype": "float32", "enforce_eager": true, "max_model_len": 128}'
SCRIPT = Path("/repo/benchmarks/engine_bare.py")


def harness_vector(run_dir: str = "/runs/engine-cpu-mp-1") -> list[str]:
    """The shape `harness run` of engine-cpu-mp launches (docker-vector.json's argv)."""
    return [
        "docker", "run", "--pull=never", "--name", "harness-engine-cpu-mp-1",
        "--cidfile", f"{run_dir}/container.cid",
        "--label", "org.harness.campaign=engine-cpu", "--label", "org.harness.lock=/l/gpu.lock",
        "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--memory", "4g", "--memory-swap", "4g", "--cpus", "2", "--shm-size", "1g",
        "--pids-limit", "4096",
        "--env", "DO_NOT_TRACK=1",
        "--env", f"HARNESS_ENGINE_ARGS={ENGINE_ARGS}",
        "--env", f"HARNESS_IMAGE_ID={IMAGE}",
        "--env", "HARNESS_OBSERVATIONS_DIR=/harness/out",
        "--env", "HARNESS_RUN_ID=engine-cpu-mp-1",
        "--env", "HARNESS_SEAL=sha256:" + "8b" * 32,
        "--env", "HOME=/tmp",
        "--env", "PYTHONPATH=/opt/harness-instrument:/opt/engine-venv/lib/python3.11/site-packages",
        "--env", "VLLM_CPU_KVCACHE_SPACE=1",
        "--mount", "type=bind,source=/repo/controls/models/tiny-llama,target=/models/model,"
                   "readonly",
        "--mount", "type=bind,source=/repo/harness/instrument,target=/opt/harness-instrument,"
                   "readonly",
        "--mount", f"type=bind,source={run_dir}/observations,target=/harness/out",
        "--mount", "type=bind,source=/repo/.engine-venv,target=/opt/engine-venv,readonly",
        IMAGE,
        "python3", "-m", "harness_observer.driver", "--model", "/models/model",
        "--max-tokens", "8",
    ]


def _pairs_of(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == flag]


# ---- the bare vector --------------------------------------------------------------------

def test_the_image_is_the_first_word_no_option_takes() -> None:
    argv = harness_vector()
    assert argv[image_index(argv)] == IMAGE
    replay = [*argv[:2], "--rm", *argv[2:]]
    assert replay[image_index(replay)] == IMAGE
    with pytest.raises(ValueError, match="no image"):
        image_index(["docker", "run", "--rm", "--name", "x"])


def test_the_bare_vector_drops_the_observer_and_nothing_else() -> None:
    argv = harness_vector()
    bare = bare_argv(argv, SCRIPT)
    envs = _pairs_of(bare, "--env")
    assert not [e for e in envs if e.startswith("HARNESS_")]
    assert "PYTHONPATH=/opt/engine-venv/lib/python3.11/site-packages" in envs
    assert {"DO_NOT_TRACK=1", "HOME=/tmp", "VLLM_CPU_KVCACHE_SPACE=1"} <= set(envs)
    mounts = _pairs_of(bare, "--mount")
    assert not [m for m in mounts if "/opt/harness-instrument" in m or "/harness/out" in m]
    assert f"type=bind,source={SCRIPT},target={BARE_TARGET},readonly" in mounts
    assert len(mounts) == len(_pairs_of(argv, "--mount")) - 1  # the script for the two
    # limits, sandbox, labels, name and cid file as the harness gave them
    for flag in ("--network", "--cap-drop", "--security-opt", "--memory", "--memory-swap",
                 "--cpus", "--shm-size", "--pids-limit", "--label", "--name", "--cidfile"):
        assert _pairs_of(bare, flag) == _pairs_of(argv, flag), flag
    assert bare[:3] == ["docker", "run", "--pull=never"]
    at = image_index(bare)
    assert bare[at] == IMAGE
    command = bare[at + 1:]
    assert command == ["python3", BARE_TARGET, "--model", "/models/model", "--max-tokens", "8",
                       "--engine-args-json", ENGINE_ARGS]
    assert json.loads(command[-1])["enforce_eager"] is True


def test_the_bare_vector_keeps_the_prompt_and_a_lone_instrument_path_goes() -> None:
    argv = harness_vector()
    at = argv.index("PYTHONPATH=/opt/harness-instrument:/opt/engine-venv/lib/python3.11/"
                    "site-packages")
    argv[at] = "PYTHONPATH=/opt/harness-instrument"
    argv += ["--prompt", "Hello there"]
    bare = bare_argv(argv, SCRIPT)
    assert not [e for e in _pairs_of(bare, "--env") if e.startswith("PYTHONPATH")]
    assert bare[-2:] == ["--prompt", "Hello there"]


def test_only_the_drivers_vector_has_a_bare_side() -> None:
    argv = [*harness_vector()[:-7], "python3", "-c", "pass"]
    with pytest.raises(ValueError, match="driver"):
        bare_argv(argv, SCRIPT)


def test_the_bare_vector_derives_from_the_replayed_one(tmp_path: Path) -> None:
    """As the benchmark does: the harness's vector made re-runnable, then the observer off."""
    run_dir = tmp_path / "proj" / "runs" / "engine-cpu-mp-1"
    run_dir.mkdir(parents=True)
    (run_dir / "docker-vector.json").write_text(json.dumps({"argv": harness_vector(
        str(run_dir))}))
    replay = _replay_argv(run_dir, 1)
    bare = bare_argv(replay, SCRIPT)
    assert bare[2] == "--rm"
    assert _pairs_of(bare, "--name") == _pairs_of(replay, "--name")
    assert _pairs_of(bare, "--name")[0].startswith("bench-replay-")
    assert str(run_dir) not in " ".join(bare)  # neither its cid file nor its observations
    assert _pairs_of(bare, "--cidfile")[0].startswith(str(tmp_path / "proj" / "runs"))


# ---- since_start_s ------------------------------------------------------------------------

VLLM_LINES = ("(MainProcess pid=1) INFO 12-01 23:07:47 [api_utils.py:286] non-default args: "
              "{'dtype': 'float32'}\n"
              "(EngineCore pid=27) INFO 12-01 23:08:10 [core.py:402] init engine took 2.82 s\n")


def _line(**kw) -> str:
    doc = {"prompt": "The capital of France is", "text": " is is", "tokens": 8,
           "since_start_s": 26.417, **kw}
    return json.dumps(doc) + "\n"


def test_since_start_is_read_among_vllms_own_lines() -> None:
    out = VLLM_LINES + _line() + "(MainProcess pid=1) INFO [shutdown] complete\n"
    assert since_start(out) == 26.417
    assert workload_line(out)["text"] == " is is"


def test_the_last_workload_line_counts_and_a_brace_that_is_no_json_is_skipped() -> None:
    out = _line(since_start_s=1.0) + "{not json\n" + "[1, 2]\n" + _line(since_start_s=2.5)
    assert since_start(out) == 2.5


@pytest.mark.parametrize("out, message", [
    (VLLM_LINES, "no JSON line"),
    (VLLM_LINES + '{"prompt": "p", "text": "t", "tokens": 8}\n', "no JSON line"),
    (_line(since_start_s=None), "since_start_s is None"),
    (_line(since_start_s=True), "since_start_s is True"),
    (_line(since_start_s=0), "since_start_s is 0"),
    (_line(since_start_s="3"), "since_start_s is '3'"),
    (_line(tokens=0), "no tokens"),
])
def test_a_workload_without_a_usable_age_is_an_error(out: str, message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        since_start(out)


def test_the_bare_workload_measures_its_age_as_the_driver_does() -> None:
    a, b = driver.process_age(), engine_bare.process_age()
    assert a is not None and b is not None and 0 <= b - a < 0.5
    assert engine_bare.parse(["--model", "m"]).prompt == driver.parse(["--model", "m"]).prompt
    assert engine_bare.parse(["--model", "m"]).max_tokens == driver.parse(
        ["--model", "m"]).max_tokens


# ---- the arithmetic -------------------------------------------------------------------------

def test_the_ratio_is_the_median_of_the_per_round_ratios() -> None:
    bare, observed = [10.0, 20.0, 40.0], [10.1, 20.4, 40.0]
    assert pair_ratio(observed, bare) == pytest.approx(1.01)
    assert cost_pct(pair_ratio(observed, bare)) == pytest.approx(1.0)
    assert pair_ratio([33.0, 36.0], [30.0, 30.0]) == pytest.approx(1.15)  # (1.1 + 1.2) / 2
    assert cost_pct(1.15) == pytest.approx(15.0)
    assert cost_pct(0.99) == pytest.approx(-1.0)  # the observed side may come out faster


def test_the_ratio_needs_as_many_rounds_on_each_side() -> None:
    with pytest.raises(ValueError):
        pair_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        pair_ratio([], [])


def test_the_rounds_come_from_the_environment_or_the_size() -> None:
    assert pairs({}, quick=False) == 5
    assert pairs({}, quick=True) == 2
    assert pairs({"ENGINE_BENCH_PAIRS": ""}, quick=False) == 5
    assert pairs({"ENGINE_BENCH_PAIRS": "1"}, quick=False) == 1
    assert pairs({"ENGINE_BENCH_PAIRS": "7"}, quick=True) == 7
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ValueError, match="ENGINE_BENCH_PAIRS"):
            pairs({"ENGINE_BENCH_PAIRS": bad}, quick=False)


def test_a_missing_engine_fails_the_benchmark_and_says_make_engine(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_engine, "missing_engine", lambda: ["the engine venv /x"])
    from benchmarks.common import Config

    with pytest.raises(RuntimeError, match=r"missing the engine venv /x\. Run `make engine`"):
        bench_engine.run_engine(Config(quick=True, work=tmp_path, image_id="sha256:0"))

"""The instrument's side of the process model: document names, the post-init ordinal that
travels with a pickled config, and the attribution that reads it."""

from __future__ import annotations

import json
import pickle

import pytest

from harness.instrument.harness_observer import trace
from harness.instrument.harness_observer.interface import MAX_RANK, document_name
from harness.judge.finalize.attribute import attribute, describe


def test_each_process_has_its_own_documents_and_the_engine_core_keeps_the_plain_names():
    assert document_name("engine-core", "startup") == "startup.json"
    assert document_name("engine-core", "generation") == "generation.json"
    assert document_name("frontend", "startup") == "frontend.startup.json"
    assert document_name("worker", "generation", 3) == "worker-3.generation.json"


@pytest.mark.parametrize("kind, phase, rank", [
    ("worker", "startup", -1), ("worker", "startup", MAX_RANK + 1), ("worker", "startup", True),
    ("worker", "startup", "0"), ("worker", "startup", 1.0), ("../x", "startup", 0),
    ("engine-core", "../startup", 0), ("EngineCore", "startup", 0)])
def test_a_name_is_never_made_from_anything_but_a_known_kind_phase_and_rank(kind, phase, rank):
    with pytest.raises(ValueError):
        document_name(kind, phase, rank)


class Config:
    """A config that, like VllmConfig, runs its post-init at construction."""

    def __init__(self) -> None:
        self.ops: list[str] = []
        self.__post_init__()

    def __post_init__(self) -> None:
        self.ops.append("+x")


@pytest.fixture
def tracer(tmp_path):
    t = trace.Tracer(str(tmp_path), watched=())
    original = Config.__dict__["__post_init__"]
    assert trace.wrap_method(Config, "__post_init__", t, "Config.__post_init__",
                             lambda s: s, counted=True)
    yield t
    Config.__post_init__ = original


def records(tmp_path):
    return [json.loads(line) for line in (tmp_path / "transitions.jsonl").read_text().splitlines()]


def test_the_post_init_count_travels_with_the_config_into_another_process(tracer, tmp_path):
    cfg = Config()  # post-init #1, in the front-end
    copy = pickle.loads(pickle.dumps(cfg))  # what the engine core receives
    copy.__post_init__()  # its first post-init here, the config's second
    cfg.__post_init__()
    ordinals = [r["ordinal"] for r in records(tmp_path) if r["event"] == "enter"]
    assert ordinals == [1, 2, 2]
    assert getattr(copy, trace.ORDINAL) == 2 and getattr(cfg, trace.ORDINAL) == 2


def test_attribution_names_the_ordinal_the_instrument_counted(tracer, tmp_path):
    cfg = Config()
    tracer.checkpoint(cfg, "start")
    copy = pickle.loads(pickle.dumps(cfg))
    tracer.watched = ("ops",)
    tracer.checkpoint(copy, "start")
    copy.__post_init__()
    tracer.checkpoint(copy, "end")
    result = attribute(records(tmp_path), "ops", "start", "end")
    [change] = result["changes"]
    assert change["within"] == ["Config.__post_init__ #2"]  # not #1: the copy's first here


@pytest.mark.parametrize("ordinal", [0, -1, True, "2", 1 << 40, None])
def test_a_forged_ordinal_is_not_believed(ordinal):
    base = {"pid": 1, "process": "EngineCore", "config_id": 7, "time": 0.0}
    recs = [{**base, "event": "snapshot", "label": "start", "watched": {}},
            {**base, "event": "enter", "hook": "H", "call": 1, "ordinal": ordinal},
            {**base, "event": "change", "field": "f", "hook": "H", "call": 1,
             "before": 1, "after": 2},
            {**base, "event": "exit", "hook": "H", "call": 1},
            {**base, "event": "snapshot", "label": "end", "watched": {}}]
    [change] = attribute(recs, "f", "start", "end")["changes"]
    assert change["within"] == ["H #1"]  # the attribution's own count


def test_a_config_that_takes_no_mark_still_runs_and_is_counted_by_the_reader(tmp_path):
    class Slotted:
        __slots__ = ("ops",)

        def __init__(self) -> None:
            self.ops = []

        def __post_init__(self) -> None:
            self.ops.append(1)

    t = trace.Tracer(str(tmp_path), watched=())
    trace.wrap_method(Slotted, "__post_init__", t, "S.__post_init__", lambda s: s,
                      counted=True)
    s = Slotted()
    s.__post_init__()
    assert s.ops == [1]
    [enter] = [r for r in records(tmp_path) if r["event"] == "enter"]
    assert enter["ordinal"] is None


def _trace(*middle: dict, process: object = "EngineCore") -> list[dict]:
    base = {"pid": 28, "process": process, "config_id": 7, "time": 0.0}
    return [{**base, "event": "change", "field": "f", "hook": None, "call": None,
             "before": 0, "after": 1},  # before the window: not counted
            {**base, "event": "snapshot", "label": "start", "watched": {}},
            *({**base, **r} for r in middle),
            {**base, "event": "snapshot", "label": "end", "watched": {}},
            {**base, "event": "change", "field": "f", "hook": None, "call": None,
             "before": 2, "after": 3}]  # after it: not counted


def test_each_change_in_the_window_is_reported_whole_and_nothing_outside_it():
    recs = _trace(
        {"event": "enter", "hook": "H", "call": 1, "ordinal": 2},
        {"event": "change", "field": "f", "hook": "H", "call": 1, "before": [1], "after": [1, 2],
         "stack": ["/x/core.py:10 run", "/x/vllm.py:5 __post_init__"]},
        {"event": "change", "field": "g", "hook": "H", "call": 1, "before": 0, "after": 1},
        {"event": "exit", "hook": "H", "call": 1},
        {"event": "error", "where": "w", "message": "m"},
        {"event": "error", "where": "w", "message": "m"},
        {"event": "change", "field": "f", "hook": None, "call": None, "before": [1, 2],
         "after": [1, 2, 3]})
    result = attribute(recs, "f", "start", "end")
    assert result["found"] is True and result["errors"] == 2
    assert result["changes"] == [
        {"field": "f", "before": [1], "after": [1, 2], "hook": "H", "pid": 28,
         "process": "EngineCore", "within": ["H #2"], "site": "/x/vllm.py:5 __post_init__",
         "same_list": None},
        {"field": "f", "before": [1, 2], "after": [1, 2, 3], "hook": None, "pid": 28,
         "process": "EngineCore", "within": [], "site": None, "same_list": None}]
    assert describe(result) == ("f changed in H #2\n"
                                "f changed in no hooked call (detected at a checkpoint)")
    assert describe(attribute(recs, "h", "start", "end")) == (
        "h: unchanged between 'start' and 'end'")
    assert describe(attribute(recs, "f", "start", "nowhere")) == (
        "f: the trace has no 'start' checkpoint followed by 'nowhere'")
    assert attribute(recs, "f", "start", "nowhere")["found"] is False


@pytest.mark.parametrize("process", ["Engine\nCore", "", "x" * 201, 7, None])
def test_a_process_name_that_is_not_one_is_not_reported(process):
    recs = _trace({"event": "change", "field": "f", "hook": None, "call": None,
                   "before": 0, "after": 1}, process=process)
    [change] = attribute(recs, "f", "start", "end")["changes"]
    assert change["process"] is None

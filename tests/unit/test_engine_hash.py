"""The second witness: vLLM's own configuration hash, recorded by the instrument
(snapshot.engine_hash) and compared within each process's pair (judge.finalize.enginehash,
through judge_processes). Each test changes one thing of a run that is accepted."""

from __future__ import annotations

import json

import pytest

from harness.instrument.harness_observer import snapshot
from harness.instrument.harness_observer.encode import DecodeError, read_observation
from harness.judge.finalize.enginehash import uncompared_changes, witness
from harness.judge.finalize.processes import BOUND, Process, judge_processes
from tests.unit.test_finalize_processes import SOURCE, judged, layout
from tests.verdicts import texts


def judge_with_contract(docs, contract):
    return judge_processes(docs, contract=contract, pins=None, expected_source=SOURCE)


def hashed(docs, value="ede509c087", **by_process):
    """Give every document the hash `value`, or per process a (startup, generation) pair."""
    for process, pair in docs.items():
        for i, phase in enumerate(("startup", "generation")):
            got = by_process.get(process.label.replace("-", "_"), (value, value))[i]
            pair[phase]["engine_hash"] = {"value": got, "note": None if got else "why"}
    return docs


def test_an_agreeing_hash_in_every_process_is_accepted_and_said():
    verdict = judged(hashed(layout()))
    assert verdict["verdict"] == "accepted", texts(verdict["reasons"])
    for entry in verdict["processes"]:
        assert entry["engine_hash"] == {"startup": "ede509c087", "generation": "ede509c087",
                                        "compared": True, "agrees": True}


def test_a_hash_that_changed_while_every_field_agrees_refuses_naming_the_process():
    docs = hashed(layout(), engine_core=("aaaa", "bbbb"))
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-HASH-DIFFERS"]
    assert texts(verdict["reasons"]) == [
        "GATE0-HASH-DIFFERS: vLLM's configuration hash changed from aaaa at start-up to bbbb "
        "at generation while every compared field agrees, in engine-core (EngineCore, pid 30)"
        "; no recorded field changed: the change is outside what the instrument encodes"]
    states = {p["process"]: p["verdict"] for p in verdict["processes"]}
    assert states == {"engine-core": "refused", "frontend": "accepted", "worker-0": "accepted"}


@pytest.mark.parametrize("process", ["frontend", "worker-0"])
def test_every_process_is_witnessed_not_only_the_engine_core(process):
    docs = hashed(layout(), **{process.replace("-", "_"): ("aaaa", "bbbb")})
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-HASH-DIFFERS"]
    assert {p["process"]: p["verdict"] for p in verdict["processes"]}[process] == "refused"


def test_the_hash_refusal_names_recorded_fields_that_changed_but_were_not_compared():
    docs = hashed(layout(), engine_core=("aaaa", "bbbb"))
    docs[BOUND]["generation"]["fields"]["cache.num_gpu_blocks"] = 9  # only at generation
    verdict = judge_with_contract(docs, ["compilation.custom_ops", "model.dtype"])
    [reason] = texts(verdict["reasons"])  # the uncompared parallel sizes did not change
    assert reason.endswith("; recorded fields left out of the comparison that changed: "
                           "cache.num_gpu_blocks")


def test_a_hash_that_changed_with_a_field_is_one_refusal_the_fields():
    docs = hashed(layout(), engine_core=("aaaa", "bbbb"))
    docs[BOUND]["generation"]["fields"]["compilation.custom_ops"] = ["all", "+x"]
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert "outside_engine_hash" not in verdict["differences"][0]
    [core] = [p for p in verdict["processes"] if p["process"] == "engine-core"]
    assert core["engine_hash"]["agrees"] is False


def test_a_field_that_differs_under_an_agreeing_hash_is_marked_outside_it():
    docs = hashed(layout())
    docs[BOUND]["generation"]["fields"]["model.dtype"] = "bfloat16"
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert texts(verdict["reasons"]) == [
        "GATE0-FIELD-DIFFERS: model.dtype differs (value-changed) outside vLLM's "
        "configuration hash (it agrees), in engine-core (EngineCore, pid 30)"]
    [d] = verdict["differences"]
    assert d["outside_engine_hash"] is True


@pytest.mark.parametrize(("lost", "shown", "kept"), [
    ("generation", "generation", "start-up"), ("startup", "start-up", "generation")])
def test_a_hash_recorded_at_one_phase_only_refuses(lost, shown, kept):
    pair = ("aaaa", None) if lost == "generation" else (None, "aaaa")
    docs = hashed(layout(), worker_0=pair)
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-HASH-MISSING"]
    assert texts(verdict["reasons"]) == [
        f"GATE0-HASH-MISSING: vLLM's configuration hash was recorded at {kept} (aaaa) and "
        f"not at {shown} (why), in worker-0 (VllmWorker-0, pid 43)"]
    entry = {p["process"]: p for p in verdict["processes"]}["worker-0"]["engine_hash"]
    assert entry == {"startup": pair[0], "generation": pair[1], "compared": False,
                     "note": f"not recorded at {shown} (why)"}
    del docs[Process("worker", 0)][lost]["engine_hash"]  # no key at all: as unrecorded
    verdict = judged(docs)
    assert texts(verdict["reasons"]) == [
        f"GATE0-HASH-MISSING: vLLM's configuration hash was recorded at {kept} (aaaa) and "
        f"not at {shown}, in worker-0 (VllmWorker-0, pid 43)"]
    entry = {p["process"]: p for p in verdict["processes"]}["worker-0"]["engine_hash"]
    assert entry["note"] == f"not recorded at {shown}"


def test_both_notes_are_said_once_each():
    docs = hashed(layout(), value=None)
    docs[BOUND]["generation"]["engine_hash"]["note"] = "other"
    entries = {p["process"]: p["engine_hash"] for p in judged(docs)["processes"]}
    assert entries["engine-core"]["note"] == "why; other"
    assert entries["frontend"]["note"] == "why"


def test_documents_without_the_witness_keep_their_verdict_and_say_so():
    verdict = judged(layout())  # written before the witness: no engine_hash key
    assert verdict["verdict"] == "accepted"
    assert {p["engine_hash"]["note"] for p in verdict["processes"]} == {
        "not recorded (no engine_hash in the documents)"}
    both_null = hashed(layout(), value=None)
    entry = judged(both_null)["processes"][0]["engine_hash"]
    assert entry == {"startup": None, "generation": None, "compared": False, "note": "why"}


def test_a_shared_configuration_object_keeps_one_difference_with_its_mark():
    docs = hashed(layout())
    worker = Process("worker", 0)
    for phase in ("startup", "generation"):  # the worker shares the engine core's object
        docs[worker][phase]["process"]["pid"] = 30
        docs[worker][phase]["observed"] = {"config_id": 7}
        docs[BOUND][phase]["observed"] = {"config_id": 7}
        docs[worker][phase]["fields"]["model.dtype"] = "float32"
    for who in (BOUND, worker):
        docs[who]["generation"]["fields"]["model.dtype"] = "bfloat16"
    verdict = judge_with_contract(docs, None)
    [d] = verdict["differences"]
    assert d["processes"] == ["engine-core", "worker-0"] and d["outside_engine_hash"] is True


def test_uncompared_changes_are_the_recorded_fields_outside_the_comparison():
    assert uncompared_changes({"a": 1, "b": 2, "c": 3}, {"a": 2, "b": 2, "d": 1}, {"a"}) == [
        "c", "d"]
    assert uncompared_changes({"x": True}, {"x": 1}, set()) == ["x"]  # canonical, typed


@pytest.mark.parametrize(("count", "tail"), [(10, "f09"), (11, "f09 and 1 more"),
                                             (12, "f09 and 2 more")])
def test_a_hash_reason_names_at_most_ten_fields(count, tail):
    start = {f"f{i:02}": 0 for i in range(count)}
    pair = {"startup": {"fields": start, "engine_hash": {"value": "a", "note": None}},
            "generation": {"fields": {k: 1 for k in start},
                           "engine_hash": {"value": "b", "note": None}}}
    [reason], _ = witness("p", pair, [], set())
    assert reason.detail.endswith(f"f07, f08, {tail}")


# -- the instrument's side ----------------------------------------------------------------

class Config:
    def __init__(self, result):
        self.result = result

    def compute_hash(self):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize(("config", "expected"), [
    (Config("0123456789"), {"value": "0123456789", "note": None}),
    (object(), {"value": None, "note": "object has no compute_hash()"}),
    (Config(RuntimeError("no model")),
     {"value": None, "note": "compute_hash() raised RuntimeError: no model"}),
    (Config(42), {"value": None, "note": "compute_hash() returned a int, not a string"}),
])
def test_the_instrument_records_vllms_hash_or_why_not(config, expected):
    assert snapshot.engine_hash(config) == expected
    doc = snapshot.observation("startup", config, rank=0, hook="test")
    assert doc["engine_hash"] == expected
    assert read_observation(json.dumps(doc))["engine_hash"] == expected


def test_a_long_failure_is_noted_short():
    note = snapshot.engine_hash(Config(ValueError("x" * 1000)))["note"]
    assert len(note) == snapshot.MAX_HASH_NOTE


SHAPE = "engine_hash must be an object with exactly value and note"
VALUE = "engine_hash.value must be null or 1..128 printable ASCII characters"
NOTE = "engine_hash.note must be a string or null"


@pytest.mark.parametrize(("witnessed", "faults"), [
    ("abc", [SHAPE]), ([], [SHAPE]), ({"value": "a"}, [SHAPE]),
    ({"value": "a", "note": None, "extra": 1}, [SHAPE]),
    ({"value": 5, "note": None}, [VALUE]), ({"value": "", "note": None}, [VALUE]),
    ({"value": "a\nb", "note": None}, [VALUE]), ({"value": "é", "note": None}, [VALUE]),
    ({"value": "a" * 129, "note": None}, [VALUE]), ({"value": None, "note": 3}, [NOTE]),
    ({"value": 5, "note": 3}, [VALUE, NOTE]),
])
def test_a_malformed_witness_makes_the_document_unreadable(witnessed, faults):
    doc = snapshot.observation("startup", object(), rank=0, hook="test")
    doc["engine_hash"] = witnessed
    with pytest.raises(DecodeError) as raised:
        read_observation(json.dumps(doc))
    assert str(raised.value) == "; ".join(faults)
    doc["complete"] = "yes"  # the witness's faults are added to the others, not instead
    with pytest.raises(DecodeError) as raised:
        read_observation(json.dumps(doc))
    assert str(raised.value) == "; ".join(["complete must be true or false", *faults])


@pytest.mark.parametrize("value", ["a", "a" * 128])
def test_a_hash_of_one_to_128_characters_reads(value):
    doc = snapshot.observation("startup", Config(value), rank=0, hook="test")
    assert read_observation(json.dumps(doc))["engine_hash"]["value"] == value


# -- what the reader sees ------------------------------------------------------------------

def test_the_morning_report_names_every_holder_of_a_shared_difference():
    from harness.readers.report.steps import gate0_lines, gate0_values
    from harness.readers.runview import _where

    shared = {"field": "model.dtype", "process": "engine-core", "kind": "value-changed",
              "processes": ["engine-core", "worker-0"], "startup": "a", "generation": "b",
              "outside_engine_hash": True}
    assert _where(shared) == "in engine-core, worker-0: "
    [line] = gate0_lines(gate0_values([shared]))
    assert line == "in engine-core, worker-0: model.dtype: start-up a, generation b"
    assert gate0_values([{**shared, "processes": ["engine-core"]}])[0]["process"] == \
        "engine-core"


def test_a_one_phase_hash_names_every_note_the_instrument_left():
    docs = hashed(layout(), worker_0=("aaaa", None))
    docs[Process("worker", 0)]["startup"]["engine_hash"]["note"] = "slow"
    [reason] = texts(judged(docs)["reasons"])
    assert "and not at generation (slow; why), in worker-0" in reason

"""Gate 0's judges at their bounds: what a re-judgement compares, the process layout's
reasons, the names a reason may print, documents that are not what their file says, and
the verdict document an unreadable observation leaves (harness.judge.finalize.contract,
processes and observed; harness.config.fieldlist).

Each test asserts what an operator or a reader of the verdict sees, for the input at the
edge of what the judge accepts."""

from __future__ import annotations

import json

import pytest

from harness.config.fieldlist import ALL, VLLM_IDENTITY, choice_faults, contract_faults, resolve
from harness.judge.finalize.contract import rejudge_contract
from harness.judge.finalize.observed import judge_run
from harness.judge.finalize.processes import (
    BOUND,
    MAX_ROLE,
    Process,
    expected,
    judge_processes,
    kind_problems,
)
from tests.verdicts import texts

SOURCE = {"seal": "sha256:s", "engine": "vllm@0.32.0", "image": "sha256:i"}
ROLES = {"engine-core": "EngineCore", "frontend": "MainProcess", "worker": "VllmWorker-{}"}
PIDS = {"engine-core": 30, "frontend": 1, "worker": 43}


def doc(kind: str, phase: str, rank: int = 0) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"kind": kind, "role": ROLES[kind].format(rank), "rank": rank,
                        "pid": PIDS[kind] + rank},
            "source": dict(SOURCE), "complete": True,
            "fields": {"model.dtype": "float32", "parallel.tensor_parallel_size": 1,
                       "parallel.pipeline_parallel_size": 1}}


def layout() -> dict[Process, dict[str, dict]]:
    return {p: {phase: doc(p.kind, phase, p.rank) for phase in ("startup", "generation")}
            for p in (BOUND, Process("frontend"), Process("worker", 0))}


def judged(docs: dict) -> dict:
    return judge_processes(docs, contract=None, pins=None, expected_source=SOURCE)


# --- what a re-judgement compares ----------------------------------------------------------


def test_a_run_judged_over_every_field_is_rejudged_over_every_field():
    assert rejudge_contract(None, {"contract": None}) == resolve(ALL)
    assert rejudge_contract(None, {"contract": None}) != resolve(None)


def test_a_recorded_contract_is_reused_only_when_it_is_a_valid_list():
    assert rejudge_contract(None, {"contract": ["model.dtype"]}) == ["model.dtype"]
    for recorded in (["model.dtype", "model.dtype"], ["model.dtype", ""], [],
                     {"fields": ["model.dtype"]}, "model.dtype", 7):
        assert rejudge_contract(None, {"contract": recorded}) == list(VLLM_IDENTITY), recorded
    assert not contract_faults({"fields": ["model.dtype"]})  # valid as a file, not as a record


def test_a_contract_given_now_wins_over_the_recorded_one():
    assert rejudge_contract(["a.b"], {"contract": None}) == ["a.b"]
    assert rejudge_contract(ALL, {"contract": ["a.b"]}) is None


def test_a_bad_contract_choice_is_named_within_the_bound_of_a_reason():
    [(where, message)] = choice_faults("x" * 1000)
    assert where == () and message.startswith("a contract is a list of dotted field names")
    assert len(message) == 200
    [(_, short)] = choice_faults("allx")
    assert short.endswith("not 'allx'") and len(short) < 200


# --- the process layout --------------------------------------------------------------------


@pytest.mark.parametrize("fields", [
    {},
    {"parallel.tensor_parallel_size": 1, "parallel.pipeline_parallel_size": 1,
     "parallel.world_size": 3},
])
def test_a_layout_fault_says_that_no_worker_is_trusted(fields):
    processes, [fault] = expected(fields)
    assert processes == [BOUND, Process("frontend")]
    assert fault.endswith(": the workers that must have been observed are unknown")


# --- names and kinds -----------------------------------------------------------------------


@pytest.mark.parametrize("role", ["E", "x" * MAX_ROLE])
def test_a_process_name_from_one_character_to_the_bound_is_printed(role):
    docs = layout()
    for phase in ("startup", "generation"):
        docs[BOUND][phase]["process"]["role"] = role
    docs[BOUND]["generation"]["fields"]["model.dtype"] = "x"
    [reason] = texts(judged(docs)["reasons"])
    assert reason.endswith(f", in engine-core ({role}, pid 30)")
    assert judged(docs)["processes"][0]["name"] == f"engine-core ({role}, pid 30)"


@pytest.mark.parametrize("process", [None, "worker", ["worker", 0]])
def test_a_document_without_a_process_record_is_of_no_kind_not_a_crash(process):
    document = doc("worker", "startup")
    document["process"] = process
    if process is None:
        del document["process"]
    assert kind_problems(Process("worker", 0), "startup", document) == [
        "worker-0.startup.json is of process kind None, not 'worker'",
        "worker-0.startup.json is of rank None, not 0"]
    assert kind_problems(Process("worker", 0), "startup", doc("worker", "startup")) == []


# --- the verdict document ------------------------------------------------------------------


def test_an_unreadable_worker_document_leaves_the_same_verdict_document(tmp_path):
    obs = tmp_path / "observations"
    obs.mkdir()
    for process, pair in layout().items():
        for phase, body in pair.items():
            (obs / process.document(phase)).write_text(json.dumps(body))
    accepted = judge_run(tmp_path)
    assert accepted["verdict"] == "accepted", texts(accepted["reasons"])
    (obs / "worker-0.generation.json").write_text("{not json")
    refused = judge_run(tmp_path)
    assert refused["verdict"] == "refused"
    assert refused["refused_by"] == ["GATE0-UNREADABLE"]
    assert set(refused) == set(accepted)  # the keys every reader of a verdict expects

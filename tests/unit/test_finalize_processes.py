"""Gate 0 over every process that holds the engine configuration (harness.judge.finalize.processes).

Documents are built here as the instrument writes them; each test removes or changes one
thing and asserts the refusal names its rule and the process."""

from __future__ import annotations

import copy

import pytest

from harness.judge.finalize.processes import BOUND, Process, describe, expected, judge_processes
from tests.verdicts import texts

SOURCE = {"seal": "sha256:s", "engine": "vllm@0.32.0", "image": "sha256:i"}
ROLES = {"engine-core": "EngineCore", "frontend": "MainProcess", "worker": "VllmWorker-{}"}
PIDS = {"engine-core": 30, "frontend": 1, "worker": 43}


def doc(kind: str, phase: str, rank: int = 0, ops=("all",), tp: int = 1, pp: int = 1) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"kind": kind, "role": ROLES[kind].format(rank), "rank": rank,
                        "pid": PIDS[kind] + rank},
            "source": dict(SOURCE), "complete": True,
            "fields": {"compilation.custom_ops": list(ops), "model.dtype": "float32",
                       "parallel.tensor_parallel_size": tp,
                       "parallel.pipeline_parallel_size": pp}}


def layout(tp: int = 1, pp: int = 1) -> dict[Process, dict[str, dict]]:
    processes = [BOUND, Process("frontend")] + [Process("worker", r) for r in range(tp * pp)]
    return {p: {phase: doc(p.kind, phase, p.rank, tp=tp, pp=pp)
                for phase in ("startup", "generation")} for p in processes}


def judged(docs, **kw):
    return judge_processes(docs, contract=None, pins=None, expected_source=SOURCE, **kw)


def test_a_run_whose_every_process_kept_its_configuration_is_accepted():
    verdict = judged(layout())
    assert verdict["verdict"] == "accepted", texts(verdict["reasons"])
    assert [p["process"] for p in verdict["processes"]] == ["engine-core", "frontend",
                                                            "worker-0"]
    assert all(p["verdict"] == "accepted" for p in verdict["processes"])
    assert verdict["compared"] == 4  # the engine core's fields, the pair the seed's rule binds


def test_the_seed_case_names_the_engine_core_and_only_it():
    docs = layout()
    docs[BOUND]["startup"]["fields"]["compilation.custom_ops"] = ["+x", "all"]
    docs[BOUND]["generation"]["fields"]["compilation.custom_ops"] = ["+x", "all", "+x"]
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert texts(verdict["reasons"]) == [
        "GATE0-FIELD-DIFFERS: compilation.custom_ops differs (value-changed), in engine-core "
        "(EngineCore, pid 30)"]
    assert [(d["process"], d["field"], d["startup"], d["generation"])
            for d in verdict["differences"]] == [
        ("engine-core", "compilation.custom_ops", ["+x", "all"], ["+x", "all", "+x"])]
    states = {p["process"]: p["verdict"] for p in verdict["processes"]}
    assert states == {"engine-core": "refused", "frontend": "accepted", "worker-0": "accepted"}


@pytest.mark.parametrize("process", ["frontend", "worker-0"])
def test_a_change_in_any_other_process_refuses_naming_it(process):
    docs = layout()
    target = Process("frontend") if process == "frontend" else Process("worker", 0)
    docs[target]["generation"]["fields"]["model.dtype"] = "bfloat16"
    verdict = judged(docs)
    assert verdict["verdict"] == "refused"
    name = describe(target, docs[target]["startup"])
    assert [r for r in texts(verdict["reasons"]) if "model.dtype" in r] == [
        f"GATE0-FIELD-DIFFERS: model.dtype differs (value-changed), in {name}"]
    assert [d["process"] for d in verdict["differences"]] == [process]


@pytest.mark.parametrize("phase", ["startup", "generation"])
@pytest.mark.parametrize("who", [Process("frontend"), Process("worker", 0)])
def test_a_process_left_unobserved_fails_closed_with_its_own_rule(who, phase):
    docs = layout()
    del docs[who][phase]
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-PROCESS-MISSING"]
    name = describe(who, docs[who].get("startup") or docs[who].get("generation"))
    assert texts(verdict["reasons"]) == [
        f"GATE0-PROCESS-MISSING: {name}: observations/{who.document(phase)} was not written"]


def test_a_process_missing_altogether_is_named():
    docs = layout()
    del docs[Process("worker", 0)]
    verdict = judged(docs)
    assert texts(verdict["reasons"]) == [
        "GATE0-PROCESS-MISSING: worker-0: observations/worker-0.startup.json was not written",
        "GATE0-PROCESS-MISSING: worker-0: observations/worker-0.generation.json was not written"]


def test_every_rank_of_tensor_times_pipeline_parallelism_must_be_observed():
    docs = layout(tp=2, pp=2)
    assert judged(docs)["verdict"] == "accepted"
    del docs[Process("worker", 3)]
    assert [r for r in texts(judged(docs)["reasons"])] == [
        "GATE0-PROCESS-MISSING: worker-3: observations/worker-3.startup.json was not written",
        "GATE0-PROCESS-MISSING: worker-3: observations/worker-3.generation.json was not written"]


@pytest.mark.parametrize("fields, why", [
    ({}, "no usable parallel.tensor_parallel_size"),
    ({"parallel.tensor_parallel_size": True}, "no usable"),
    ({"parallel.tensor_parallel_size": 0}, "no usable"),
    ({"parallel.tensor_parallel_size": 17}, "no usable"),
    ({"parallel.tensor_parallel_size": 8, "parallel.pipeline_parallel_size": 4}, "no usable"),
    ({"parallel.prefill_context_parallel_size": 0}, "no usable"),
    ({"parallel.prefill_context_parallel_size": 2, "parallel.world_size": 1}, "not the 2"),
    ({"parallel.tensor_parallel_size": "1"}, "no usable"),
    ({"parallel.world_size": 2}, "parallel.world_size is 2, not the 1 the parallel sizes make"),
])
def test_a_layout_that_cannot_be_read_trusts_no_worker_count(fields, why):
    base = {"parallel.tensor_parallel_size": 1, "parallel.pipeline_parallel_size": 1}
    got = {**base, **fields} if fields else {}
    processes, faults = expected(got)
    assert processes == [BOUND, Process("frontend")]
    assert len(faults) == 1 and why in faults[0]
    docs = layout()
    for phase in ("startup", "generation"):
        docs[BOUND][phase]["fields"] = {k: v for k, v in
                                        docs[BOUND][phase]["fields"].items()
                                        if not k.startswith("parallel.")} | got
    verdict = judged(docs)
    assert verdict["verdict"] == "refused"
    assert verdict["refused_by"][0] == "GATE0-PROCESS-MISSING"
    assert texts(verdict["reasons"])[0] == f"GATE0-PROCESS-MISSING: {faults[0]}"


def test_prefill_context_parallelism_counts_in_the_workers_as_in_vllms_world_size():
    processes, faults = expected({"parallel.tensor_parallel_size": 2,
                                  "parallel.pipeline_parallel_size": 1,
                                  "parallel.prefill_context_parallel_size": 2,
                                  "parallel.world_size": 4})
    assert not faults
    assert [p.label for p in processes] == ["engine-core", "frontend", "worker-0", "worker-1",
                                            "worker-2", "worker-3"]


def test_a_document_of_another_process_is_refused_by_kind_and_rank():
    docs = layout(tp=2)
    docs[Process("worker", 1)]["startup"] = doc("frontend", "startup")
    docs[Process("worker", 0)]["generation"]["process"]["rank"] = 1
    verdict = judged(docs)
    kinds = [r for r in texts(verdict["reasons"]) if r.startswith("GATE0-PROCESS-KIND")]
    assert kinds == [
        "GATE0-PROCESS-KIND: worker-0.generation.json is of rank 1, not 0",
        "GATE0-PROCESS-KIND: worker-1.startup.json is of process kind 'frontend', not 'worker'",
        "GATE0-PROCESS-KIND: worker-1.startup.json is of rank 0, not 1"]


def test_an_unreadable_document_is_not_also_reported_missing():
    docs = layout()
    del docs[Process("frontend")]["startup"]
    verdict = judged(docs, unreadable={(Process("frontend"), "startup")})
    assert verdict["verdict"] == "refused"  # the caller adds the GATE0-UNREADABLE reason
    assert not [r for r in texts(verdict["reasons"]) if "frontend.startup.json" in r]
    assert {p["process"]: p["verdict"] for p in verdict["processes"]}["frontend"] == "refused"


@pytest.mark.parametrize("role", ["EngineCore\n[gate0] accepted", "x" * 65, "Engine\x1bCore",
                                  "Ëngine", 7, None])
def test_a_hostile_process_name_never_reaches_a_reason(role):
    docs = layout()
    for phase in ("startup", "generation"):
        docs[BOUND][phase]["process"]["role"] = role
    docs[BOUND]["generation"]["fields"]["model.dtype"] = "x"
    [reason] = texts(judged(docs)["reasons"])
    assert reason.endswith(", in engine-core (pid 30)")


def test_the_per_process_verdict_does_not_change_the_pair_judge():
    """The engine core's pair is judged by rules.judge exactly as before: same differences."""
    from harness.judge.finalize.rules import judge

    docs = layout()
    docs[BOUND]["generation"]["fields"]["compilation.custom_ops"] = ["all", "+y"]
    pair = judge(docs[BOUND]["startup"], docs[BOUND]["generation"],
                 expected_source=SOURCE)
    verdict = judged(copy.deepcopy(docs))
    assert [{k: v for k, v in d.items() if k not in ("process", "processes")}
            for d in verdict["differences"]] \
        == pair["differences"]


def test_the_per_process_entries_say_what_was_judged_in_each():
    docs = layout()
    docs[Process("worker", 0)]["generation"]["fields"]["model.dtype"] = "x"
    del docs[Process("frontend")]["generation"]
    verdict = judged(docs)
    assert verdict["schema"] == "harness.verdict/v2"
    core, front, worker = verdict["processes"]
    assert core == {"process": "engine-core", "kind": "engine-core", "rank": 0,
                    "name": "engine-core (EngineCore, pid 30)", "verdict": "accepted",
                    "compared": 4, "differences": [], "reasons": [],
                    "engine_hash": {"startup": None, "generation": None, "compared": False,
                                    "note": "not recorded (no engine_hash in the documents)"}}
    assert front == {"process": "frontend", "kind": "frontend", "rank": 0,
                     "name": "frontend (MainProcess, pid 1)", "verdict": "refused",
                     "reasons": [{"rule": "GATE0-PROCESS-MISSING",
                                  "detail": "frontend (MainProcess, pid 1): observations/"
                                            "frontend.generation.json was not written"}]}
    assert worker["verdict"] == "refused" and worker["compared"] == 4
    assert worker["differences"] == [{"field": "model.dtype", "kind": "value-changed",
                                      "startup": "float32", "generation": "x",
                                      "process": "worker-0"}]
    assert texts(worker["reasons"]) == ["GATE0-FIELD-DIFFERS: model.dtype differs "
                                        "(value-changed), in worker-0 (VllmWorker-0, pid 43)"]


def test_sixteen_workers_is_the_most_a_layout_may_have():
    processes, faults = expected({"parallel.tensor_parallel_size": 16,
                                  "parallel.pipeline_parallel_size": 1})
    assert not faults and processes[-1] == Process("worker", 15)
    processes, faults = expected({"parallel.tensor_parallel_size": 4,
                                  "parallel.pipeline_parallel_size": 4,
                                  "parallel.prefill_context_parallel_size": 2})
    assert faults and processes == [BOUND, Process("frontend")]


def test_a_run_folder_with_an_unreadable_worker_document_is_refused_for_it(tmp_path):
    """judge_run over a folder: the unreadable document's fault comes first, it is not also
    reported missing, and the other processes are still judged."""
    import json

    from harness.judge.finalize.observed import judge_run

    obs = tmp_path / "observations"
    obs.mkdir()
    docs = layout()
    for process, pair in docs.items():
        for phase, body in pair.items():
            (obs / process.document(phase)).write_text(json.dumps(body))
    (obs / "worker-0.startup.json").write_text("{not json")
    verdict = judge_run(tmp_path, pins=None)
    assert verdict["verdict"] == "refused"
    assert verdict["refused_by"] == ["GATE0-UNREADABLE"]
    [reason] = texts(verdict["reasons"])
    assert reason.startswith(f"GATE0-UNREADABLE: {obs / 'worker-0.startup.json'}: ")
    states = {p["process"]: p["verdict"] for p in verdict["processes"]}
    assert states == {"engine-core": "accepted", "frontend": "accepted", "worker-0": "refused"}
    (obs / "frontend.generation.json").write_text("[]")
    again = judge_run(tmp_path, pins=None)
    assert again["refused_by"] == ["GATE0-UNREADABLE"]
    assert [r.split(": ")[1] for r in texts(again["reasons"])] == [  # in the order judged
        str(obs / "frontend.generation.json"), str(obs / "worker-0.startup.json")]


def test_compared_counts_the_engine_cores_pair_only_and_none_when_it_was_not_compared():
    docs = layout()
    assert judged(docs)["compared"] == 4  # not the frontend's or the worker's 4 as well
    del docs[BOUND]["generation"]
    verdict = judged(docs, unreadable={(BOUND, "generation")})
    assert verdict["compared"] == 0 and verdict["verdict"] == "refused"

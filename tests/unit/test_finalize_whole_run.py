"""Gate 0 over the whole run: every document found is judged, one engine build across the
processes, the instrument's own errors, and one configuration object held by several
processes reported once (harness.judge.finalize.processes, .observed).

Documents are built as the instrument writes them (`observed.config_id` included); each
test changes one thing and asserts the verdict, through the pure judge and through the
finalizer's entry point (`judge_run`, the gate0 post-step's) or `refinalize`."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.judge.finalize import observed, processes
from harness.judge.finalize.observed import SealedReader, judge_run
from harness.judge.finalize.processes import (
    BOUND,
    Process,
    fold,
    identity,
    judge_processes,
    named,
    trace_errors,
)
from harness.judge.finalize.refinalize import refinalize
from harness.measure.runfolder.manifest import make_read_only, write_manifest
from tests.verdicts import texts

SOURCE = {"seal": "sha256:s", "engine": "vllm@0.32.0", "image": "sha256:i"}
ROLES = {"engine-core": "EngineCore", "frontend": "MainProcess", "worker": "VllmWorker-{}"}
PIDS = {"engine-core": 30, "frontend": 1, "worker": 43}
W0, W1, FE = Process("worker", 0), Process("worker", 1), Process("frontend")
CORE = "engine-core (EngineCore, pid 30)"


def doc(kind: str, phase: str, rank: int = 0, tp: int = 1, backend: str = "mp") -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"kind": kind, "role": ROLES[kind].format(rank), "rank": rank,
                        "pid": PIDS[kind] + rank},
            "source": dict(SOURCE), "complete": True, "errors": [],
            "fields": {"compilation.custom_ops": ["all"], "model.dtype": "float32",
                       "parallel.tensor_parallel_size": tp,
                       "parallel.pipeline_parallel_size": 1,
                       "parallel.distributed_executor_backend": backend},
            "observed": {"config_id": 1000 + PIDS[kind] + rank, "hook": "h"}}


def layout(tp: int = 1, backend: str = "mp") -> dict[Process, dict[str, dict]]:
    procs = [BOUND, FE] + [Process("worker", r) for r in range(tp)]
    return {p: {phase: doc(p.kind, phase, p.rank, tp, backend)
                for phase in ("startup", "generation")} for p in procs}


def judged(docs, **kw):
    return judge_processes(docs, contract=None, pins=None, expected_source=SOURCE, **kw)


def share(docs, process: Process, with_: Process = BOUND) -> None:
    """`process`'s documents taken of `with_`'s object, in its process (the uni layout)."""
    for phase in ("startup", "generation"):
        docs[process][phase]["process"]["pid"] = docs[with_][phase]["process"]["pid"]
        docs[process][phase]["process"]["role"] = docs[with_][phase]["process"]["role"]
        docs[process][phase]["observed"]["config_id"] = \
            docs[with_][phase]["observed"]["config_id"]


def change(docs, process: Process, value=("all", "+x")) -> None:
    docs[process]["generation"]["fields"]["compilation.custom_ops"] = list(value)


# ---- one configuration object, one difference --------------------------------------------

def test_a_change_of_one_object_two_processes_hold_is_reported_once_naming_both():
    docs = layout(backend="uni")
    share(docs, W0)
    change(docs, BOUND)
    change(docs, W0)
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert texts(verdict["reasons"]) == [
        f"GATE0-FIELD-DIFFERS: compilation.custom_ops differs (value-changed), in {CORE} "
        "and worker-0 (EngineCore, pid 30), one configuration object"]
    assert verdict["differences"] == [{
        "field": "compilation.custom_ops", "kind": "value-changed", "startup": ["all"],
        "generation": ["all", "+x"], "process": "engine-core",
        "processes": ["engine-core", "worker-0"]}]
    states = {p["process"]: p["verdict"] for p in verdict["processes"]}
    assert states == {"engine-core": "refused", "frontend": "accepted", "worker-0": "refused"}
    worker = verdict["processes"][2]
    assert texts(worker["reasons"]) == [
        "GATE0-FIELD-DIFFERS: compilation.custom_ops differs (value-changed), in worker-0 "
        "(EngineCore, pid 30)"]


def test_three_holders_of_one_object_are_all_named_once():
    docs = layout(backend="uni")
    share(docs, W0)
    share(docs, FE)
    for p in (BOUND, FE, W0):
        change(docs, p)
    verdict = judged(docs)
    assert [d["processes"] for d in verdict["differences"]] == [
        ["engine-core", "frontend", "worker-0"]]
    assert texts(verdict["reasons"]) == [
        f"GATE0-FIELD-DIFFERS: compilation.custom_ops differs (value-changed), in {CORE} "
        "and frontend (EngineCore, pid 30) and worker-0 (EngineCore, pid 30), one "
        "configuration object"]


@pytest.mark.parametrize("how", ["own-process", "other-object-at-generation", "other-value",
                                 "no-config-id", "pid-not-int"])
def test_without_evidence_of_one_object_each_process_reports_its_own(how):
    docs = layout(backend="uni")
    share(docs, W0)
    change(docs, BOUND)
    change(docs, W0, ("all", "+y") if how == "other-value" else ("all", "+x"))
    if how == "own-process":
        for phase in ("startup", "generation"):
            docs[W0][phase]["process"]["pid"] = 43
    if how == "other-object-at-generation":
        docs[W0]["generation"]["observed"]["config_id"] = 7
    if how == "no-config-id":
        del docs[W0]["startup"]["observed"]
        del docs[BOUND]["startup"]["observed"]
    if how == "pid-not-int":
        for p in (W0, BOUND):
            for phase in ("startup", "generation"):
                docs[p][phase]["process"]["pid"] = True
    verdict = judged(docs)
    assert [d["processes"] for d in verdict["differences"]] == [["engine-core"], ["worker-0"]]
    assert [r.split(", in ")[1] for r in texts(verdict["reasons"])] == [
        processes.describe(BOUND, docs[BOUND]["startup"]),
        processes.describe(W0, docs[W0]["startup"])]


def test_identity_is_the_pid_and_object_at_each_phase_or_nothing():
    docs = layout()
    assert identity(docs[BOUND]) == ((30, 1030), (30, 1030))
    assert identity({"startup": docs[BOUND]["startup"]}) is None
    for bad in (None, "1030", True, 1.0):
        one = layout()[BOUND]
        one["generation"]["observed"]["config_id"] = bad
        assert identity(one) is None
    one = layout()[BOUND]
    one["generation"]["observed"] = [1030]
    assert identity(one) is None


def test_fold_keeps_apart_what_started_from_other_values():
    entries = [{"process": p, "differences": [
        {"field": "f", "kind": "value-changed", "startup": s, "generation": 2, "process": p}]}
        for p, s in (("engine-core", 1), ("worker-0", 0))]
    held = {"engine-core": ((1, 2),), "worker-0": ((1, 2),)}
    assert [d["processes"] for d in fold(entries, held)] == [["engine-core"], ["worker-0"]]


def test_every_difference_of_one_object_is_folded():
    docs = layout(backend="uni")
    share(docs, W0)
    for p in (BOUND, W0):
        change(docs, p)
        docs[p]["generation"]["fields"]["model.dtype"] = "bfloat16"
    verdict = judged(docs)
    assert [(d["field"], d["processes"]) for d in verdict["differences"]] == [
        ("compilation.custom_ops", ["engine-core", "worker-0"]),
        ("model.dtype", ["engine-core", "worker-0"])]


def test_a_process_whose_only_document_is_unreadable_is_judged_without_it():
    docs = layout()
    verdict = judged(docs, unreadable={(W1, "startup")})
    assert verdict["verdict"] == "refused"
    assert [p["process"] for p in verdict["processes"]] == [
        "engine-core", "frontend", "worker-0", "worker-1"]
    assert texts(verdict["reasons"]) == [
        "GATE0-PROCESS-MISSING: worker-1: observations/worker-1.generation.json was not "
        "written"]


def test_fold_keeps_differences_of_unknown_objects_apart():
    entries = [{"process": p, "differences": [
        {"field": "f", "kind": "value-changed", "startup": 1, "generation": 2, "process": p}]}
        for p in ("engine-core", "worker-0")]
    apart = fold(entries, {"engine-core": None, "worker-0": None})
    assert [d["processes"] for d in apart] == [["engine-core"], ["worker-0"]]
    same = fold(entries, {"engine-core": ((1, 2),), "worker-0": ((1, 2),)})
    assert [d["processes"] for d in same] == [["engine-core", "worker-0"]]
    assert fold([*entries[:1], {"process": "frontend"}], {}) == apart[:1]


def test_show_prints_a_shared_difference_once_naming_its_holders():
    from harness.readers.runview import _where

    assert _where({"process": "engine-core", "processes": ["engine-core", "worker-0"]}) == \
        "in engine-core, worker-0: "
    assert _where({"process": "engine-core", "processes": ["engine-core"]}) == \
        "in engine-core: "
    assert _where({"process": "engine-core"}) == "in engine-core: "


# ---- one engine build across processes ---------------------------------------------------

@pytest.mark.parametrize("key", ["engine", "seal", "image"])
def test_a_process_on_another_build_refuses_naming_it_and_both_identities(key):
    docs = layout()
    for phase in ("startup", "generation"):
        docs[W0][phase]["source"][key] = "other"
    verdict = judged(docs)
    assert f"GATE0-BUILD-DIFFERS: worker-0 (VllmWorker-0, pid 43) ran source.{key} 'other', " \
        f"the engine core {SOURCE[key]!r}" in texts(verdict["reasons"])
    assert [r for r in texts(verdict["reasons"]) if "BUILD" in r and "other" in r][1:] == []
    assert {p["process"]: p["verdict"] for p in verdict["processes"]}["worker-0"] == "refused"
    assert verdict["refused_by"][0] == "GATE0-BUILD-DIFFERS"


def test_a_build_that_differs_at_one_phase_only_is_named_too():
    docs = layout()
    docs[FE]["generation"]["source"]["engine"] = None
    assert texts(judged(docs)["reasons"]) == [
        "GATE0-BUILD-DIFFERS: frontend (MainProcess, pid 1) ran source.engine None, the "
        "engine core 'vllm@0.32.0'",
        "GATE0-SOURCE: source.engine differs: startup 'vllm@0.32.0', generation None, in "
        "frontend (MainProcess, pid 1)",
        "GATE0-SOURCE: generation source.engine is None, the run recorded 'vllm@0.32.0', in "
        "frontend (MainProcess, pid 1)"]


def test_the_engine_core_is_the_reference_not_compared_with_itself():
    docs = layout()
    docs[BOUND]["generation"]["source"]["engine"] = "vllm@other"
    assert judged(docs)["refused_by"] == ["GATE0-SOURCE"]


# ---- every document found is judged ----------------------------------------------------------

def test_a_worker_the_layout_does_not_run_refuses_and_its_change_is_reported():
    docs = layout(tp=1)
    docs[W1] = {phase: doc("worker", phase, 1) for phase in ("startup", "generation")}
    change(docs, W1)
    verdict = judged(docs)
    assert texts(verdict["reasons"]) == [
        "GATE0-PROCESS-UNEXPECTED: worker-1 (VllmWorker-1, pid 44): observations/"
        "worker-1.startup.json is of a process the engine core's layout does not run",
        "GATE0-PROCESS-UNEXPECTED: worker-1 (VllmWorker-1, pid 44): observations/"
        "worker-1.generation.json is of a process the engine core's layout does not run",
        "GATE0-FIELD-DIFFERS: compilation.custom_ops differs (value-changed), in worker-1 "
        "(VllmWorker-1, pid 44)"]
    assert [p["process"] for p in verdict["processes"]] == [
        "engine-core", "frontend", "worker-0", "worker-1"]
    assert verdict["processes"][3]["verdict"] == "refused"
    assert texts(verdict["processes"][3]["reasons"]) == texts(verdict["reasons"])
    assert [d["process"] for d in verdict["differences"]] == ["worker-1"]


def test_an_unexpected_process_with_one_document_is_named_missing_the_other():
    docs = layout(tp=1)
    docs[W1] = {"startup": doc("worker", "startup", 1)}
    assert texts(judged(docs)["reasons"]) == [
        "GATE0-PROCESS-UNEXPECTED: worker-1 (VllmWorker-1, pid 44): observations/"
        "worker-1.startup.json is of a process the engine core's layout does not run",
        "GATE0-PROCESS-MISSING: worker-1 (VllmWorker-1, pid 44): observations/"
        "worker-1.generation.json was not written"]


def test_with_no_readable_layout_a_found_worker_is_judged_but_not_called_unexpected():
    docs = layout(tp=1)
    for phase in ("startup", "generation"):
        docs[BOUND][phase]["fields"]["parallel.tensor_parallel_size"] = 0
    verdict = judged(docs)
    assert verdict["refused_by"] == ["GATE0-PROCESS-MISSING"]
    assert [p["process"] for p in verdict["processes"]] == ["engine-core", "frontend",
                                                            "worker-0"]


@pytest.mark.parametrize("backend, refused", [("mp", True), ("ray", True), ("uni", False),
                                              ("external_launcher", False)])
def test_a_worker_document_from_the_engine_core_process_refuses_where_workers_own_one(
        backend, refused):
    docs = layout(backend=backend)
    docs[W0]["generation"]["process"]["pid"] = 30
    verdict = judged(docs)
    want = ["GATE0-PROCESS-KIND: worker-0.generation.json was written by the engine core's "
            f"process (pid 30), but the {backend} executor runs worker-0 in a process of its "
            "own"]
    assert [r for r in texts(verdict["reasons"]) if "KIND" in r] == (want if refused else [])


def test_a_worker_document_under_the_engine_core_process_name_refuses_too():
    docs = layout()
    docs[W0]["startup"]["process"]["role"] = "EngineCore"
    verdict = judged(docs)
    assert texts(verdict["reasons"])[0] == (
        "GATE0-PROCESS-KIND: worker-0.startup.json was written by the engine core's process "
        "(pid 30), but the mp executor runs worker-0 in a process of its own")
    assert verdict["processes"][2]["verdict"] == "refused"


def test_the_front_end_in_the_engine_core_process_is_no_foreign_worker():
    docs = layout()
    share(docs, FE)
    assert judged(docs)["verdict"] == "accepted"


@pytest.mark.parametrize("name, got", [
    ("startup.json", (BOUND, "startup")), ("generation.json", (BOUND, "generation")),
    ("frontend.generation.json", (FE, "generation")),
    ("worker-0.startup.json", (W0, "startup")),
    ("worker-4095.generation.json", (Process("worker", 4095), "generation")),
    ("worker-4096.startup.json", None), ("worker-01.startup.json", None),
    ("worker-1.startup.jsonx", None), ("xstartup.json", None), ("transitions.jsonl", None),
    ("engine-core.startup.json", None), ("frontend.json", None),
])
def test_a_file_name_is_read_as_the_document_the_instrument_names_so(name, got):
    assert named(name) == got


# ---- the instrument's own errors -------------------------------------------------------------

def test_an_error_recorded_in_a_document_refuses_naming_the_process_and_file():
    docs = layout()
    docs[W0]["generation"]["errors"] = ["model.x: ValueError: boom\n", 7]
    verdict = judged(docs)
    assert texts(verdict["reasons"]) == [
        "GATE0-INSTRUMENT-ERROR: worker-0 (VllmWorker-0, pid 43): observations/"
        "worker-0.generation.json records an instrument error: model.x: ValueError: boom\\u000a",
        "GATE0-INSTRUMENT-ERROR: worker-0 (VllmWorker-0, pid 43): observations/"
        "worker-0.generation.json records an instrument error: 7"]
    assert verdict["processes"][2]["verdict"] == "refused"


def test_errors_that_are_not_a_list_refuse_and_a_legacy_document_without_them_does_not():
    docs = layout()
    docs[BOUND]["startup"]["errors"] = "boom"
    docs[BOUND]["generation"]["errors"] = ["x"]
    del docs[FE]["startup"]["errors"]
    verdict = judged(docs)
    assert texts(verdict["reasons"]) == texts(verdict["processes"][0]["reasons"]) == [
        f"GATE0-INSTRUMENT-ERROR: {CORE}: observations/startup.json: its errors are not a list",
        f"GATE0-INSTRUMENT-ERROR: {CORE}: observations/generation.json records an instrument "
        "error: x"]


def test_twenty_errors_are_all_named():
    docs = layout()
    docs[BOUND]["startup"]["errors"] = ["e"] * 20
    assert len(judged(docs)["reasons"]) == 20
    assert len(trace_errors([error(1)] * 20, {})) == 20


def test_many_errors_are_bounded_and_counted():
    docs = layout()
    docs[BOUND]["startup"]["errors"] = ["e" * 400] * 22
    found = texts(judged(docs)["reasons"])
    assert len(found) == 21
    assert found[0].endswith(": " + "e" * 300)
    assert found[-1] == (f"GATE0-INSTRUMENT-ERROR: {CORE}: observations/startup.json: and 2 "
                         "more errors")


def error(pid, where="startup capture", message="FileExistsError: [Errno 17] File exists",
          process="EngineCore"):
    return {"event": "error", "pid": pid, "process": process, "where": where,
            "message": message}


def test_an_error_in_the_trace_refuses_naming_every_observed_process_of_its_pid():
    docs = layout(backend="uni")
    share(docs, W0)
    verdict = judged(docs, trace=[{"event": "snapshot", "pid": 30, "label": "x"},
                                  error(30), error(99, "register", "RuntimeError: x", "P\n")])
    assert texts(verdict["reasons"]) == [
        f"GATE0-INSTRUMENT-ERROR: {CORE} and worker-0 (EngineCore, pid 30): the trace records "
        "an instrument error in startup capture: FileExistsError: [Errno 17] File exists",
        "GATE0-INSTRUMENT-ERROR: pid 99 (P\\u000a): the trace records an instrument error in "
        "register: RuntimeError: x"]
    assert verdict["verdict"] == "refused"


def test_trace_errors_are_bounded_and_counted():
    found = [r.text() for r in trace_errors([error(1)] * 21, {1: ["a"]})]
    assert len(found) == 21
    assert found[-1] == "GATE0-INSTRUMENT-ERROR: the trace records 1 more errors"
    assert trace_errors([error(1, where=None, message=None, process=None)], {}) [0].detail == \
        "pid 1 (None): the trace records an instrument error in None: None"


# ---- through the finalizer's entry point and refinalize ---------------------------------------

def lay_out(run: Path, docs, trace: list[dict] | None = None) -> Path:
    (run / "observations").mkdir(parents=True)
    for process, pair in docs.items():
        for phase, d in pair.items():
            (run / "observations" / process.document(phase)).write_text(json.dumps(d))
    if trace is not None:
        (run / "observations" / "transitions.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in trace))
    (run / "preflight.json").write_text(json.dumps(
        {"source_seal": {"seal": SOURCE["seal"]}, "image": SOURCE["image"]}))
    return run


def test_the_finalizer_reads_every_document_in_the_folder(tmp_path):
    docs = layout()
    docs[W1] = {phase: doc("worker", phase, 1) for phase in ("startup", "generation")}
    change(docs, W1)
    run = lay_out(tmp_path / "r", docs, [error(30)])
    (run / "observations" / "worker-01.startup.json").write_text("not an observation")
    (run / "observations" / "notes.txt").write_text("x")
    verdict = judge_run(run)
    assert verdict["refused_by"] == ["GATE0-PROCESS-UNEXPECTED", "GATE0-FIELD-DIFFERS",
                                     "GATE0-INSTRUMENT-ERROR"]
    assert [d["process"] for d in verdict["differences"]] == ["worker-1"]


def test_an_unreadable_unexpected_document_is_refused_once(tmp_path):
    run = lay_out(tmp_path / "r", layout())
    (run / "observations" / "worker-1.startup.json").write_text("{")
    verdict = judge_run(run)
    assert verdict["refused_by"] == ["GATE0-UNREADABLE", "GATE0-PROCESS-MISSING"]
    assert [r for r in texts(verdict["reasons"]) if "worker-1.startup" in r][1:] == []


def test_a_folder_of_more_entries_than_the_bound_refuses(tmp_path, monkeypatch):
    run = lay_out(tmp_path / "r", layout())
    monkeypatch.setattr(observed, "MAX_ENTRIES", 6)
    assert judge_run(run)["verdict"] == "accepted"  # exactly six documents
    for extra in ("x", "y"):  # one over the bound, then two: said once
        (run / "observations" / extra).write_text("")
        verdict = judge_run(run)
        assert texts(verdict["reasons"]) == [
            "GATE0-UNREADABLE: observations/ holds more than 6 entries"]
        assert verdict["verdict"] == "refused"


def test_observations_that_are_a_link_are_not_listed(tmp_path):
    run = lay_out(tmp_path / "r", layout())
    assert len(observed._Observations(run, None).found()) == 6
    (tmp_path / "o").symlink_to(run / "observations")
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "observations").symlink_to(tmp_path / "o")
    assert observed._Observations(tmp_path / "r2", None).found() == []


def test_an_unreadable_trace_refuses(tmp_path):
    run = lay_out(tmp_path / "r", layout())
    (run / "observations" / "transitions.jsonl").mkdir()
    verdict = judge_run(run)
    assert verdict["refused_by"] == ["GATE0-UNREADABLE"]
    assert texts(verdict["reasons"]) == [
        "GATE0-UNREADABLE: observations/transitions.jsonl cannot be read: "
        f"{run}/observations/transitions.jsonl: the transition trace is a folder, not a "
        "regular file"]


def test_an_unreadable_trace_and_an_unreadable_document_are_both_named(tmp_path):
    run = lay_out(tmp_path / "r", layout())
    (run / "observations" / "worker-0.startup.json").write_text("{")
    (run / "observations" / "transitions.jsonl").mkdir()
    assert [r.split(":")[0:2] for r in texts(judge_run(run)["reasons"])] == [
        ["GATE0-UNREADABLE", f" {run}/observations/worker-0.startup.json"],
        ["GATE0-UNREADABLE", " observations/transitions.jsonl cannot be read"]]


def test_a_trace_that_is_not_utf8_is_unreadable_sealed_or_not(tmp_path):
    run = lay_out(tmp_path / "r", layout())
    (run / "observations" / "transitions.jsonl").write_bytes(b'{"a": 1}\n\xff\n')
    plain = judge_run(run)
    assert texts(plain["reasons"]) == [
        "GATE0-UNREADABLE: observations/transitions.jsonl cannot be read: "
        f"{run}/observations/transitions.jsonl: the transition trace is not UTF-8 text "
        "(invalid start byte at byte 9)"]
    sealed(run)
    assert judge_run(run, sealed=SealedReader(run))["reasons"] == plain["reasons"]


def sealed(run: Path) -> Path:
    (run / "run.json").write_text(json.dumps({
        "schema": "harness.run/v1", "run_id": "r1", "status": "accepted",
        "seal": SOURCE["seal"], "image": {"name": "img", "id": SOURCE["image"]}}))
    write_manifest(run)
    make_read_only(run)
    return run


def test_refinalize_judges_every_sealed_document_and_the_sealed_trace(tmp_path):
    docs = layout()
    docs[W0] = {phase: doc("worker", phase, 0) for phase in ("startup", "generation")}
    for phase in ("startup", "generation"):
        docs[W0][phase]["source"]["engine"] = "vllm@other"
    docs[W1] = {phase: doc("worker", phase, 1) for phase in ("startup", "generation")}
    run = sealed(lay_out(tmp_path / "r", docs, [error(43, "worker start-up")]))
    reader = SealedReader(run)
    assert sorted(reader.names("observations")) == sorted(
        [p.document(ph) for p in docs for ph in ("startup", "generation")]
        + ["transitions.jsonl"])
    record, _ = refinalize(run, datetime(2026, 1, 1, tzinfo=UTC), "all")
    assert record["refused_by"] == ["GATE0-BUILD-DIFFERS", "GATE0-PROCESS-UNEXPECTED",
                                    "GATE0-INSTRUMENT-ERROR"]
    assert "GATE0-INSTRUMENT-ERROR: worker-0 (VllmWorker-0, pid 43): the trace records an " \
        "instrument error in worker start-up: FileExistsError: [Errno 17] File exists" in \
        texts(record["reasons"])


def test_a_sealed_run_without_a_trace_reads_no_errors(tmp_path):
    run = sealed(lay_out(tmp_path / "r", layout()))
    assert judge_run(run, sealed=SealedReader(run))["verdict"] == "accepted"


def test_the_sealed_trace_is_read_within_its_bound(tmp_path, monkeypatch):
    run = sealed(lay_out(tmp_path / "r", layout(), [error(30)]))
    monkeypatch.setattr(observed, "TRACE_BYTES", 10)
    verdict = judge_run(run, sealed=SealedReader(run))
    assert texts(verdict["reasons"]) == [
        "GATE0-UNREADABLE: observations/transitions.jsonl cannot be read: "
        f"{run}/observations/transitions.jsonl: over the 10 byte limit"]


def test_a_front_end_observation_that_fails_is_an_error_in_the_trace_that_refuses(tmp_path):
    """The front-end's write failing (its document exists: a second capture) is recorded
    where Gate 0 reads it, not only said in the workload's log."""
    from harness.instrument.harness_observer import driver

    run = lay_out(tmp_path / "r", layout())
    before = (run / "observations" / "frontend.startup.json").read_bytes()
    llm = type("LLM", (), {})()
    llm.llm_engine = type("Engine", (), {})()
    llm.llm_engine.vllm_config = object()
    driver.observe_frontend(str(run / "observations"), llm, "startup", "again")
    assert (run / "observations" / "frontend.startup.json").read_bytes() == before
    verdict = judge_run(run)
    assert verdict["refused_by"] == ["GATE0-INSTRUMENT-ERROR"]
    # this test's pid is no document's: the reason names the pid and the trace's name
    (reason,) = texts(verdict["reasons"])
    assert reason.startswith(
        f"GATE0-INSTRUMENT-ERROR: pid {os.getpid()} (MainProcess): the trace records an "
        "instrument error in front-end startup observation: FileExistsError: [Errno 17] File "
        "exists: ")

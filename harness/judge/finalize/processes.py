"""Gate 0 over every process that holds the engine configuration. Pure functions.

vLLM runs the configuration in up to three kinds of process: the front-end (the process
that called `LLM`), the engine core, and one worker per rank (docs/gate0-contract.md). The
instrument observes each at start-up and at generation (contract.document_name). This
module decides which processes a run must have observed, judges each one's pair with the
one Gate-0 judge (`rules.assess`), and folds the results into one verdict that names, in
every reason and difference, the process it is about.

The engine core's pair (`startup.json`, `generation.json`) is judged first and must be
readable before anything else is decided, because the process layout is read from it (how
many workers the engine runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.base.catalogue import GATE0_PROCESS_KIND, GATE0_PROCESS_MISSING
from harness.base.reason import Reason
from harness.base.states import Verdict
from harness.instrument.harness_observer.interface import (
    ENGINE_CORE,
    FRONTEND,
    PHASES,
    WORKER,
    document_name,
)
from harness.judge.finalize.rules import assess, document
from harness.judge.verdictfile import items

MAX_ROLE = 64  # a process name longer than this is not one vLLM gives
MAX_WORKERS = 16  # more workers than one host's GPUs: not a layout the harness judges
TENSOR = "parallel.tensor_parallel_size"
PIPELINE = "parallel.pipeline_parallel_size"
PREFILL_CONTEXT = "parallel.prefill_context_parallel_size"  # vLLM 0.32 counts it in world_size


@dataclass(frozen=True, order=True)
class Process:
    """One observed process of the engine: its kind and (workers) rank."""

    kind: str
    rank: int = 0

    @property
    def label(self) -> str:
        return f"{WORKER}-{self.rank}" if self.kind == WORKER else self.kind

    def document(self, phase: str) -> str:
        return document_name(self.kind, phase, self.rank)


BOUND = Process(ENGINE_CORE)


def _size(fields: dict[str, Any], name: str) -> int | None:
    value = fields.get(name)
    return value if type(value) is int and 1 <= value <= MAX_WORKERS else None


def expected(startup_fields: dict[str, Any]) -> tuple[list[Process], list[str]]:
    """The processes a run must have observed, from the engine core's start-up fields:
    the engine core, the front-end, and one worker per rank of tensor x pipeline (x
    prefill-context, where the engine has it) parallelism, vLLM's own `world_size`
    (cross-checked with `parallel.world_size` when recorded). The second value says why
    the worker count cannot be read (then none is trusted)."""
    sizes = [_size(startup_fields, name) for name in (TENSOR, PIPELINE)]
    if PREFILL_CONTEXT in startup_fields:
        sizes.append(_size(startup_fields, PREFILL_CONTEXT))
    processes = [BOUND, Process(FRONTEND)]
    workers = 1
    for size in sizes:
        workers = workers * size if size is not None and workers <= MAX_WORKERS else 0
    if not 1 <= workers <= MAX_WORKERS:
        return processes, [
            f"the engine core's start-up observation gives no usable {TENSOR} and "
            f"{PIPELINE} (integers whose product, with {PREFILL_CONTEXT} where recorded, is "
            f"1..{MAX_WORKERS} workers): the workers that must have been observed are unknown"]
    world = startup_fields.get("parallel.world_size")
    if world is not None and world != workers:
        return processes, [
            f"parallel.world_size is {world!r}, not the {workers} the parallel sizes make: "
            "the workers that must have been observed are unknown"]
    return processes + [Process(WORKER, rank) for rank in range(workers)], []


def kind_problems(process: Process, phase: str, doc: dict[str, Any]) -> list[str]:
    """Why a document is not of the process its file name says (empty: it is)."""
    where = process.document(phase)
    got = doc.get("process") if isinstance(doc.get("process"), dict) else {}
    reasons = []
    if got.get("kind") != process.kind:
        reasons.append(f"{where} is of process kind {got.get('kind')!r}, not {process.kind!r}")
    if process.kind == WORKER and got.get("rank") != process.rank:
        reasons.append(f"{where} is of rank {got.get('rank')!r}, not {process.rank}")
    return reasons


def _plain(text: str) -> bool:
    """A process name fit to print inside a reason: short, one line, printable ASCII."""
    return 0 < len(text) <= MAX_ROLE and text.isascii() and text.isprintable()


def describe(process: Process, doc: dict[str, Any] | None) -> str:
    """`worker-0 (VllmWorker-0, pid 43)`: the process, as every reason names it."""
    got = doc.get("process") if doc and isinstance(doc.get("process"), dict) else {}
    role, pid = got.get("role"), got.get("pid")
    shown = role if isinstance(role, str) and _plain(role) else None  # the workload's words
    inner = ", ".join(x for x in (shown, f"pid {pid}" if type(pid) is int else None) if x)
    return f"{process.label} ({inner})" if inner else process.label


def _judge_one(process: Process, pair: dict[str, dict[str, Any]], unreadable: set,
               **judged: Any) -> tuple[list[Reason], dict[str, Any]]:
    """One process's reasons (each naming it) and its entry in `processes`."""
    name = describe(process, pair.get("startup") or pair.get("generation"))
    missing = [process.document(phase) for phase in PHASES
               if phase not in pair and (process, phase) not in unreadable]
    faults = [Reason(GATE0_PROCESS_MISSING, f"{name}: observations/{doc} was not written")
              for doc in missing]
    faults += [Reason(GATE0_PROCESS_KIND, problem) for phase in PHASES if phase in pair
               for problem in kind_problems(process, phase, pair[phase])]
    entry: dict[str, Any] = {"process": process.label, "kind": process.kind,
                             "rank": process.rank, "name": name}
    if len(pair) == len(PHASES):
        found, comparison = assess(pair["startup"], pair["generation"], **judged)
        faults += [Reason(r.rule, f"{r.detail}, in {name}") for r in found]
        # accepted unless a fault, the comparison's own included, refuses it below
        entry.update(verdict=Verdict.ACCEPTED, compared=comparison["compared"],
                     differences=[{**d, "process": process.label}
                                  for d in comparison["differences"]])
    entry["reasons"] = items(faults)
    if faults or "verdict" not in entry:
        entry["verdict"] = Verdict.REFUSED
    return faults, entry


def judge_processes(docs: dict[Process, dict[str, dict[str, Any]]], *,
                    contract: list[str] | None = None, pins: dict[str, Any] | None = None,
                    expected_source: dict[str, str] | None = None,
                    unreadable: set[tuple[Process, str]] | None = None) -> dict[str, Any]:
    """The Gate-0 verdict over every process. `docs` maps each process to the documents
    read for it ({"startup": doc, "generation": doc}, either may be absent); the engine
    core's pair must be there (the caller refuses without it); `unreadable` names the
    (process, phase) documents that were there but could not be read: the caller has
    refused them (GATE0-UNREADABLE), so they are not reported missing as well."""
    unreadable = unreadable or set()
    want, layout_faults = expected(docs[BOUND]["startup"]["fields"])
    reasons = [Reason(GATE0_PROCESS_MISSING, fault) for fault in layout_faults]
    per_process: list[dict[str, Any]] = []
    for process in want:
        faults, entry = _judge_one(process, docs.get(process, {}), unreadable,
                                   contract=contract, pins=pins,
                                   expected_source=expected_source)
        per_process.append(entry)
        reasons += faults
    verdict = document(reasons, contract, processes=per_process,
                       differences=[d for e in per_process for d in e.get("differences", [])],
                       compared=sum(e.get("compared", 0) for e in per_process
                                    if e["process"] == BOUND.label))
    if unreadable:
        verdict["verdict"] = Verdict.REFUSED
    return verdict

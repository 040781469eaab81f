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

import re
from dataclasses import dataclass
from typing import Any

from harness.base.catalogue import (
    GATE0_BUILD_DIFFERS,
    GATE0_FIELD_DIFFERS,
    GATE0_INSTRUMENT_ERROR,
    GATE0_PROCESS_KIND,
    GATE0_PROCESS_MISSING,
    GATE0_PROCESS_UNEXPECTED,
)
from harness.base.reason import Reason
from harness.base.states import Verdict
from harness.base.tree import printable
from harness.instrument.harness_observer.encode import canonical
from harness.instrument.harness_observer.interface import (
    ENGINE_CORE,
    FRONTEND,
    MAX_RANK,
    PHASES,
    WORKER,
    document_name,
)
from harness.judge.finalize.enginehash import mark, witness
from harness.judge.finalize.rules import SOURCE_KEYS, assess, document
from harness.judge.verdictfile import items

MAX_ROLE = 64  # a process name longer than this is not one vLLM gives
MAX_WORKERS = 16  # more workers than one host's GPUs: not a layout the harness judges
TENSOR = "parallel.tensor_parallel_size"
PIPELINE = "parallel.pipeline_parallel_size"
PREFILL_CONTEXT = "parallel.prefill_context_parallel_size"  # vLLM 0.32 counts it in world_size
BACKEND = "parallel.distributed_executor_backend"
OWN_PROCESS = ("mp", "ray")  # the executors that run each worker in a process of its own
MAX_ERRORS = 20  # instrument errors named per document (and of the trace); the rest counted
MAX_ERROR_CHARS = 300


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
NAMED = re.compile(rf"^(?:({FRONTEND})\.|{WORKER}-(0|[1-9][0-9]{{0,3}})\.)?"
                   r"(startup|generation)\.json$")


def named(name: str) -> tuple[Process, str] | None:
    """The process and phase an observation file name is of (`document_name`'s inverse);
    None for any other name."""
    match = NAMED.match(name)
    if match is None:
        return None
    frontend, rank, phase = match.groups()
    if rank is not None and int(rank) > MAX_RANK:
        return None
    process = (Process(FRONTEND) if frontend else BOUND if rank is None
               else Process(WORKER, int(rank)))
    return process, phase


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
    """One process's reasons (each naming it) but its field differences, which
    `judge_processes` names once per configuration object (`fold`), and its entry in
    `processes` (whose own reasons include them)."""
    name = describe(process, pair.get("startup") or pair.get("generation"))
    missing = [process.document(phase) for phase in PHASES
               if phase not in pair and (process, phase) not in unreadable]
    faults = [Reason(GATE0_PROCESS_MISSING, f"{name}: observations/{doc} was not written")
              for doc in missing]
    faults += [Reason(GATE0_PROCESS_KIND, problem) for phase in PHASES if phase in pair
               for problem in kind_problems(process, phase, pair[phase])]
    entry: dict[str, Any] = {"process": process.label, "kind": process.kind,
                             "rank": process.rank, "name": name}
    differing: list[Reason] = []
    if len(pair) == len(PHASES):
        found, comparison = assess(pair["startup"], pair["generation"], **judged)
        faults += [Reason(r.rule, f"{r.detail}, in {name}") for r in found
                   if r.rule != GATE0_FIELD_DIFFERS]
        hashed, witnessed = witness(name, pair, comparison["differences"],
                                    set(comparison["names"]))
        faults += hashed
        marked = mark(comparison["differences"], witnessed)
        differing = [Reason(GATE0_FIELD_DIFFERS, f"{field_differs(d)}, in {name}")
                     for d in marked]
        # accepted unless a fault, the comparison's own included, refuses it below
        entry.update(verdict=Verdict.ACCEPTED, compared=comparison["compared"],
                     differences=[{**d, "process": process.label} for d in marked],
                     engine_hash=witnessed)
    entry["reasons"] = items(faults + differing)
    if faults or differing or "verdict" not in entry:
        entry["verdict"] = Verdict.REFUSED
    return faults, entry


def identity(pair: dict[str, dict[str, Any]]) -> tuple[tuple[int, int], ...] | None:
    """The configuration object a process's documents were taken of: (pid, the object's
    id) at each phase, as the instrument records them (`process.pid`, `observed.config_id`).
    Two processes with the same hold one object: an id is unique among the live objects of
    one process, and the engine core's configuration lives as long as the engine. None when
    a document or either number is missing (then nothing is shared)."""
    out = []
    for phase in PHASES:
        doc = pair.get(phase)
        observed = doc.get("observed") if doc is not None else None
        pid = doc["process"].get("pid") if doc is not None else None
        config = observed.get("config_id") if isinstance(observed, dict) else None
        if type(pid) is not int or type(config) is not int:
            return None
        out.append((pid, config))
    return tuple(out)


def fold(entries: list[dict[str, Any]], identities: dict[str, Any]) -> list[dict[str, Any]]:
    """Every difference once: the same difference (field, kind, both raw values) in
    processes that hold one configuration object (the same `identity`) is one change,
    listed once, its `processes` naming each holder (`process` the first, the engine
    core where it is one of them)."""
    out: list[dict[str, Any]] = []
    seen: dict[tuple, dict[str, Any]] = {}
    for entry in entries:
        held = identities.get(entry["process"])
        for d in entry.get("differences", []):
            key = (held, d["field"], d["kind"], canonical(d["startup"]),
                   canonical(d["generation"]))
            if held is not None and key in seen:
                seen[key]["processes"].append(entry["process"])
                continue
            seen[key] = {**d, "processes": [entry["process"]]}
            out.append(seen[key])
    return out


def field_differs(difference: dict[str, Any]) -> str:
    """`compilation.custom_ops differs (value-changed)`, and whether vLLM's own hash missed
    it (`enginehash.mark`)."""
    text = f"{difference['field']} differs ({difference['kind']})"
    return text + (" outside vLLM's configuration hash (it agrees)"
                   if difference.get("outside_engine_hash") else "")


def differing(differences: list[dict[str, Any]], names: dict[str, str],
              label: str) -> list[Reason]:
    """GATE0-FIELD-DIFFERS of each difference first found in process `label`, naming every
    process that holds it."""
    return [Reason(GATE0_FIELD_DIFFERS, f"{field_differs(d)}, in "
                   + " and ".join(names[p] for p in d["processes"])
                   + (", one configuration object" if len(d["processes"]) > 1 else ""))
            for d in differences if d["processes"][0] == label]


def build_faults(name: str, pair: dict[str, dict[str, Any]],
                 reference: dict[str, Any]) -> list[Reason]:
    """Why a process did not run the engine core's build: its documents' seal, engine and
    image are each compared with the engine core's start-up observation."""
    found = dict.fromkeys((key, doc["source"].get(key)) for phase in PHASES if phase in pair
                          for doc in (pair[phase],) for key in SOURCE_KEYS
                          if doc["source"].get(key) != reference.get(key))
    return [Reason(GATE0_BUILD_DIFFERS, f"{name} ran source.{key} {got!r}, the engine core "
                   f"{reference.get(key)!r}") for key, got in found]


def foreign_worker(process: Process, pair: dict[str, dict[str, Any]],
                   core: dict[str, Any], backend: Any) -> list[Reason]:
    """A worker's document written by the engine core's process (its pid or its process
    name) where the executor (`backend`) runs every worker in a process of its own."""
    if process.kind != WORKER or backend not in OWN_PROCESS:
        return []
    return [Reason(GATE0_PROCESS_KIND, f"{process.document(phase)} was written by the engine "
                   f"core's process (pid {core.get('pid')!r}), but the {backend} executor "
                   f"runs {process.label} in a process of its own")
            for phase in PHASES if phase in pair
            for got in (pair[phase]["process"],)
            if got.get("pid") == core.get("pid") or got.get("role") == core.get("role")]


def _said(text: Any) -> str:
    return printable(text if isinstance(text, str) else repr(text))[:MAX_ERROR_CHARS]


def document_errors(process: Process, name: str,
                    pair: dict[str, dict[str, Any]]) -> list[Reason]:
    """Each error the instrument recorded in one of the process's documents (`errors`)."""
    out = []
    for phase in PHASES:
        errors = pair[phase].get("errors", []) if phase in pair else []
        where = f"{name}: observations/{process.document(phase)}"
        if not isinstance(errors, list):
            out.append(Reason(GATE0_INSTRUMENT_ERROR, f"{where}: its errors are not a list"))
            continue
        out += [Reason(GATE0_INSTRUMENT_ERROR, f"{where} records an instrument error: "
                       f"{_said(e)}") for e in errors[:MAX_ERRORS]]
        if len(errors) > MAX_ERRORS:
            out.append(Reason(GATE0_INSTRUMENT_ERROR,
                              f"{where}: and {len(errors) - MAX_ERRORS} more errors"))
    return out


def trace_errors(records: list[dict[str, Any]], names: dict[int, list[str]]) -> list[Reason]:
    """Each `error` record of the transition trace, naming the process by its pid (every
    observed process of that pid, else the pid and the name the trace gives)."""
    errors = [r for r in records if r.get("event") == "error"]
    out = []
    for r in errors[:MAX_ERRORS]:
        who = " and ".join(names.get(r["pid"], [])) or \
            f"pid {r['pid']} ({_said(r.get('process'))})"
        out.append(Reason(GATE0_INSTRUMENT_ERROR, f"{who}: the trace records an instrument "
                          f"error in {_said(r.get('where'))}: {_said(r.get('message'))}"))
    if len(errors) > MAX_ERRORS:
        out.append(Reason(GATE0_INSTRUMENT_ERROR,
                          f"the trace records {len(errors) - MAX_ERRORS} more errors"))
    return out


def unexpected(process: Process, name: str, pair: dict[str, dict[str, Any]]) -> list[Reason]:
    return [Reason(GATE0_PROCESS_UNEXPECTED, f"{name}: observations/{process.document(phase)} "
                   "is of a process the engine core's layout does not run")
            for phase in PHASES if phase in pair]


def judge_processes(docs: dict[Process, dict[str, dict[str, Any]]], *,
                    contract: list[str] | None = None, pins: dict[str, Any] | None = None,
                    expected_source: dict[str, str] | None = None,
                    unreadable: set[tuple[Process, str]] | None = None,
                    trace: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The Gate-0 verdict over every process. `docs` maps each process to the documents
    read for it ({"startup": doc, "generation": doc}, either may be absent), every
    document found, not only those of the processes the layout predicts; the engine core's
    pair must be there (the caller refuses without it); `unreadable` names the (process,
    phase) documents that were there but could not be read: the caller has refused them
    (GATE0-UNREADABLE), so they are not reported missing as well; `trace` is the transition
    trace's records, whose errors refuse."""
    unreadable = unreadable or set()
    core = docs[BOUND]["startup"]
    want, layout_faults = expected(core["fields"])
    found = sorted(set(docs) | {p for p, _ in unreadable})
    extra = [p for p in found if p not in want]
    reasons = [Reason(GATE0_PROCESS_MISSING, fault) for fault in layout_faults]
    judged: list[tuple[Process, list[Reason], list[Reason], dict[str, Any]]] = []
    for process in want + extra:
        pair = docs.get(process, {})
        faults, entry = _judge_one(process, pair, unreadable, contract=contract, pins=pins,
                                   expected_source=expected_source)
        own = [] if layout_faults or process in want else unexpected(
            process, entry["name"], pair)
        own += foreign_worker(process, pair, core["process"], core["fields"].get(BACKEND))
        own += [] if process == BOUND else build_faults(entry["name"], pair, core["source"])
        errors = document_errors(process, entry["name"], pair)
        if own or errors:
            entry["reasons"] = items(own) + entry["reasons"] + items(errors)
            entry["verdict"] = Verdict.REFUSED
        judged.append((process, own + faults, errors, entry))
    per_process = [entry for *_, entry in judged]
    differences = fold(per_process, {p.label: identity(docs.get(p, {})) for p in found})
    names = {entry["process"]: entry["name"] for entry in per_process}
    for process, faults, errors, _ in judged:  # in the order of each process's own reasons
        reasons += faults + differing(differences, names, process.label) + errors
    pids: dict[int, list[str]] = {}
    for process in found:
        for phase in PHASES:
            pid = docs.get(process, {}).get(phase, {}).get("process", {}).get("pid")
            if type(pid) is int and names[process.label] not in pids.setdefault(pid, []):
                pids[pid].append(names[process.label])
    reasons += trace_errors(trace or [], pids)
    verdict = document(reasons, contract, processes=per_process, differences=differences,
                       compared=sum(e.get("compared", 0) for e in per_process
                                    if e["process"] == BOUND.label))
    if unreadable:
        verdict["verdict"] = Verdict.REFUSED
    return verdict

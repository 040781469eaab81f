"""Gate 0 over a run folder: read every observation its engine wrote, and judge them.

The files come out of a container, so each is read through the bounded reader, or, for a
sealed folder (`SealedReader`), only as the bytes its SHA256SUMS vouches for. The engine
core's pair is read first: without it nothing is compared (GATE0-MISSING); the process
layout it records says which other processes must have been observed
(`finalize.processes`), and every one of them is judged.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from harness.base.catalogue import GATE0_MISSING, GATE0_UNREADABLE, REFINALIZE_NOT_INTACT
from harness.base.errors import InvalidInput, Refused
from harness.base.readfile import InputError, TooLarge, read_fd
from harness.base.reason import Reason, rules
from harness.base.states import Verdict
from harness.base.tree import open_beneath
from harness.instrument.harness_observer.interface import PHASES, TRANSITIONS
from harness.judge import verdictfile
from harness.judge.finalize.attribute import MAX_BYTES as TRACE_BYTES
from harness.judge.finalize.attribute import parse_trace, read_trace
from harness.judge.finalize.documents import MAX_BYTES as MAX_DOCUMENT_BYTES
from harness.judge.finalize.documents import DocumentError, parse_document, read_document
from harness.judge.finalize.processes import BOUND, Process, judge_processes, named
from harness.measure.runfolder import manifest
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.layout import OBSERVATIONS, PREFLIGHT, RECORD, SUMS
from harness.measure.runfolder.runjson import RunRecord

MAX_ENTRIES = 4096  # files in observations/: a real run writes a few dozen


def refusal(reasons: list[Reason], contract: list[str] | None) -> dict[str, Any]:
    """A verdict for a run whose observations cannot be compared at all."""
    return {**verdictfile.document(reasons), "verdict": Verdict.REFUSED,
            "refused_by": rules(reasons), "differences": [], "compared": 0,
            "contract": contract}


def read_run(run_dir: Path) -> RunRecord | None:
    """run.json, or None when absent or unreadable (the gate then binds to nothing)."""
    try:
        return run_record.read(run_dir)
    except InvalidInput:
        return None


def _source_of(run: RunRecord | None) -> dict[str, str]:
    return {} if run is None else expected_source({"seal": run.seal, "image": run.image})


def expected_source(run: dict[str, Any] | None) -> dict[str, str]:
    """The seal and image Id the run recorded, which both observations must carry."""
    if run is None:
        return {}
    out = {}
    if isinstance(run.get("seal"), str):
        out["seal"] = run["seal"]
    image = run.get("image")
    if isinstance(image, dict) and isinstance(image.get("id"), str):
        out["image"] = image["id"]
    return out


def recorded_source(run_dir: Path) -> dict[str, str]:
    """What the harness itself recorded as the run's seal and image: run.json once sealed,
    preflight.json while the post-steps run (run.json is written after them)."""
    run = read_run(run_dir)
    if run is not None:
        return _source_of(run)
    try:
        pre = json.loads((Path(run_dir) / PREFLIGHT).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(pre, dict):
        return {}
    seal = pre.get("source_seal")
    return expected_source({"seal": seal.get("seal") if isinstance(seal, dict) else None,
                            "image": pre.get("image")})


class _Observations:
    """Reads a run folder's observation documents, by path or through its seal, noting
    each unreadable one (GATE0-UNREADABLE) instead of raising."""

    def __init__(self, run_dir: Path, sealed: SealedReader | None) -> None:
        self.run_dir, self.sealed = Path(run_dir), sealed
        self.unreadable: list[Reason] = []

    def read(self, name: str) -> tuple[dict[str, Any] | None, bool]:
        """(the document or None when absent, whether it was readable)."""
        rel = f"{OBSERVATIONS}/{name}"
        path = self.run_dir / rel
        try:
            if self.sealed is not None:
                if not self.sealed.claims(rel):
                    return None, True
                return parse_document(self.sealed.text(rel), str(path)), True
            return (read_document(path) if os.path.lexists(path) else None), True
        except DocumentError as e:
            self.unreadable += [Reason(GATE0_UNREADABLE, fault) for fault in e.faults]
            return None, False

    def found(self) -> list[tuple[Process, str]]:
        """Every observation document the folder holds (the seal's claims, for a sealed
        one), by the process and phase its name says; other files are not observations."""
        if self.sealed is not None:
            names = self.sealed.names(OBSERVATIONS)
        else:
            folder = self.run_dir / OBSERVATIONS
            if folder.is_symlink() or not folder.is_dir():
                return []
            names = []
            with os.scandir(folder) as entries:
                for count, entry in enumerate(entries, 1):
                    if count > MAX_ENTRIES:
                        self.unreadable.append(Reason(GATE0_UNREADABLE, f"{OBSERVATIONS}/ "
                                                      f"holds more than {MAX_ENTRIES} entries"))
                        break
                    names.append(entry.name)
        return sorted(filter(None, map(named, names)))

    def trace(self) -> list[dict[str, Any]]:
        """The transition trace's records (none when it is absent); unreadable: noted."""
        rel = f"{OBSERVATIONS}/{TRANSITIONS}"
        try:
            if self.sealed is not None:
                if not self.sealed.claims(rel):
                    return []
                return parse_trace(self.sealed.read(rel, TRACE_BYTES).decode())[0]
            return read_trace(self.run_dir / rel)[0]
        except InputError as e:
            why = [e.message]
        except DocumentError as e:
            why = e.faults
        except UnicodeDecodeError as e:  # strict, as the plain reader reads it
            why = [f"{self.run_dir}/{rel}: the transition trace is not UTF-8 text "
                   f"({e.reason} at byte {e.start})"]
        self.unreadable += [Reason(GATE0_UNREADABLE, f"{rel} cannot be read: {fault}")
                            for fault in why]
        return []

    def pair(self, process: Process) -> tuple[dict[str, dict[str, Any]], set[str]]:
        """The process's documents by phase, and the phases whose document is unreadable."""
        docs, bad = {}, set()
        for phase in PHASES:
            doc, readable = self.read(process.document(phase))
            if doc is not None:
                docs[phase] = doc
            elif not readable:
                bad.add(phase)
        return docs, bad


def judge_run(run_dir: Path, contract: list[str] | None = None,
              pins: dict[str, Any] | None = None,
              sealed: SealedReader | None = None) -> dict[str, Any]:
    """Gate-0 verdict for `run_dir`, over every process the engine observed (the engine
    core's pair first: without it nothing is compared). Missing or unreadable observations
    refuse.

    With `sealed`, every byte judged (observations, run.json) is read once and must hash
    to what the run's SHA256SUMS claims: what is judged is what the seal vouches for, even
    if someone swaps a file between `verify` and the reading."""
    observations = _Observations(run_dir, sealed)
    bound, bad = observations.pair(BOUND)
    missing = [Reason(GATE0_MISSING, f"{OBSERVATIONS}/{BOUND.document(phase)} was not written")
               for phase in PHASES if phase not in bound and phase not in bad]
    if missing or observations.unreadable:
        return refusal(missing + observations.unreadable, contract)
    docs: dict[Process, dict[str, dict[str, Any]]] = {BOUND: bound}
    unreadable: set[tuple[Process, str]] = set()
    for process in dict.fromkeys(p for p, _ in observations.found()):
        if process != BOUND:
            docs[process], bad = observations.pair(process)
            unreadable |= {(process, phase) for phase in bad}
    source = (_source_of(sealed.record()) if sealed is not None
              else recorded_source(Path(run_dir)))
    verdict = judge_processes(docs, contract=contract, pins=pins, expected_source=source,
                              unreadable=unreadable, trace=observations.trace())
    if observations.unreadable:
        verdict["reasons"] = verdictfile.items(observations.unreadable) + verdict["reasons"]
        verdict["refused_by"] = list(dict.fromkeys([GATE0_UNREADABLE, *verdict["refused_by"]]))
        verdict["verdict"] = Verdict.REFUSED
    return verdict


class SealedReader:
    """Reads files of a sealed run folder only as the bytes its SHA256SUMS vouches for."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        try:
            entries, bad = manifest.load(run_dir / SUMS)
        except InputError as e:
            raise Refused(e.message, rule=REFINALIZE_NOT_INTACT) from None
        if bad:
            raise Refused(f"{run_dir}/{SUMS}: line {bad[0][0]}: {bad[0][1]}",
                          rule=REFINALIZE_NOT_INTACT)
        self._claims = dict(entries)

    def claims(self, rel: str) -> bool:
        return rel in self._claims

    def names(self, folder: str) -> list[str]:
        """The paths, relative to `folder`, of the files the seal vouches for beneath it."""
        return [rel.removeprefix(f"{folder}/") for rel in self._claims
                if rel.startswith(f"{folder}/")]

    def read(self, rel: str, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
        """The bytes of `rel`, read once beneath the run folder; Refused unless they hash
        to the seal's claim, DocumentError when larger than `limit`."""
        try:
            fd = open_beneath(self.run_dir, rel)
            try:
                data = read_fd(fd, limit)
            except TooLarge:
                raise DocumentError([f"{self.run_dir}/{rel}: over the {limit} byte "
                                     "limit"]) from None
            finally:
                os.close(fd)
        except OSError as e:
            raise Refused(f"{self.run_dir}/{rel}: cannot read: {e.strerror or e}",
                          rule=REFINALIZE_NOT_INTACT) from None
        if hashlib.sha256(data).hexdigest() != self._claims.get(rel):
            raise Refused(f"{self.run_dir}/{rel} is not the file its seal vouches for",
                          rule=REFINALIZE_NOT_INTACT)
        return data

    def text(self, rel: str) -> str:
        return self.read(rel).decode("utf-8", "replace")

    def record(self) -> RunRecord | None:
        """run.json as sealed, through the one record reader; None if unreadable."""
        if not self.claims(RECORD):
            return None
        try:
            data = self.read(RECORD, run_record.RECORD_LIMIT)
            return run_record.from_dict(run_record.parse(data, f"{self.run_dir}/{RECORD}"))
        except (InvalidInput, DocumentError):
            return None

    def json(self, rel: str) -> dict[str, Any] | None:
        if not self.claims(rel):
            return None
        try:
            doc = json.loads(self.read(rel))
        except (ValueError, RecursionError):  # DocumentError is a ValueError
            return None
        return doc if isinstance(doc, dict) else None

"""Which earlier runs a run is compared with, which of its figures, which way each figure
gets worse, and what the calls add up to. Pure: `harness.driver.regress` does the I/O.

A figure means something only against earlier ACCEPTED runs of the same control, image
Id and host identity (less `HOST_VOLATILE`), each verified from its sealed folder. A
folder named like such a run that is none is `Junk`: counted by kind and skipped, never
counted against the baseline's size, so no number of them can push a verified run out.
A figure not in `DIRECTIONS` is not called, and the addendum says why."""

from __future__ import annotations

import enum
import hashlib
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.base.states import Status
from harness.judge.regression import (
    ALPHA,
    MAX_BASELINE,
    MIN_BASELINE,
    MIN_EFFECT,
    Call,
    Movement,
    Worse,
    call,
)
from harness.measure.host import identity

ADDENDUM = "regression"  # the addendum folder: addenda/<stamp>-regression/
FILE = "regression.json"
SCHEMA = "harness.regression/v1"

# Which way each figure of the performance log (harness.measure.perflog.figures: the
# run's own times and lock interval, and vLLM's start-up figures, harness.measure.metrics)
# gets worse. Time and memory a run spends are worse when they grow; what the engine can
# hold or serve (KV cache, tokens, concurrency, context) is worse when it shrinks.
DIRECTIONS: dict[str, Worse] = {
    "duration_s": Worse.HIGHER,  # the container ran longer
    "lock_wait_s": Worse.HIGHER,  # the GPU lock came later
    "lock_hold_s": Worse.HIGHER,  # the GPU was held longer
    "kv_cache_gib": Worse.LOWER,  # less memory left for the KV cache
    "kv_tokens": Worse.LOWER,  # fewer tokens fit in it
    "max_concurrency": Worse.LOWER,  # fewer requests at once
    "max_model_len": Worse.LOWER,  # a shorter context
    "model_load_gib": Worse.HIGHER,  # the weights took more memory
    "model_load_s": Worse.HIGHER,
    "graph_capture_s": Worse.HIGHER,
    "graph_capture_gib": Worse.HIGHER,  # graphs took more memory
    "engine_init_s": Worse.HIGHER,
    "compilation_s": Worse.HIGHER,
    "energy_j": Worse.HIGHER,  # the GPUs drew more energy (telemetry, where power is known)
    "energy_per_token_j": Worse.HIGHER,  # each generated token cost more energy
    "memory_peak_bytes": Worse.HIGHER,  # the container's memory peak (telemetry)
}
# The perflog's figures that are never called, and why (the addendum names them).
NOT_CALLED = {
    "exit_code": "an outcome, not a measure",
    "generated_tokens": "what the workload asked for, not how well it ran",
    "cpu_pct_mean": "a rate over the run's own length: the same work done faster shows a "
                    "higher mean, so neither way is worse",
}
NO_DIRECTION = "no direction in harness.judge.comparable.DIRECTIONS"
# Host snapshot fields (harness.measure.host.identity) that change with no change to the
# host: those that differ between two snapshots of one boot (when it was taken, the
# uptime), and the boot (a reboot is the same machine; a new kernel, driver, firmware or
# engine is not).
HOST_VOLATILE = identity.VOLATILE_KEYS | {"boot_id"}


class Confirmation(enum.StrEnum):
    """What a confirmation rerun made of its original's regression call."""

    CONFIRMED = "confirmed"  # the run and its rerun together are a regression too
    UNCONFIRMED = "unconfirmed"  # they are not: a one-off, no alert


@dataclass(frozen=True)
class Candidate:
    """A run as its verified sealed folder says: what decides comparability, and its figures."""

    run_id: str
    control: str | None
    status: Status | None
    image_id: str | None
    host: str | None  # host_identity of its host-before.json
    sealed: datetime | None
    digest: str  # sha256 of its SHA256SUMS: the seal the call rests on
    figures: Mapping[str, float] = field(default_factory=dict)  # finite numbers only

    def ref(self) -> dict:
        return {"run_id": self.run_id, "seal_digest": self.digest}


class Junk(enum.StrEnum):
    """Why a folder named like a run of the control is no run a baseline may rest on. Junk
    never stands in a baseline and never counts against its size, whatever its name says."""

    NOT_A_FOLDER = "not a folder"  # a symlink, a file, a device: no run folder
    EMPTY = "empty"  # nothing in it
    UNSEALED = "unsealed"  # no SHA256SUMS
    SEAL_FAILS = "seal fails"  # its files are not the ones its SHA256SUMS vouches for
    UNREADABLE = "unreadable"  # no readable run record of this very run
    ANOTHER_CONTROL = "another control"  # its sealed run.json names another control


@dataclass(frozen=True)
class Unverified:
    """A run folder left out because its seal does not verify (or it cannot be read)."""

    run_id: str
    why: str
    kind: Junk = Junk.SEAL_FAILS

    def doc(self) -> dict:
        return {"run_id": self.run_id, "kind": str(self.kind), "why": self.why}


MAX_NAMED = 10  # junk folders a call names with why (every one is counted, by kind)


@dataclass(frozen=True)
class Selection:
    """The baseline of a call (newest first) and the folders left out of it: junk counted
    by kind (`skipped`), the first of it named (`left_out`), and what a cap on the work
    left unexamined (`unexamined` folders, `stopped` saying which cap)."""

    baseline: tuple[Candidate, ...]
    left_out: tuple[Unverified, ...] = ()
    other: int = 0  # runs of the control not in the baseline (status, image, host, later, older)
    skipped: Mapping[str, int] = field(default_factory=dict)
    unexamined: int = 0
    stopped: str | None = None


@dataclass(frozen=True)
class FigureCall:
    """The call over one figure, with the medians it compared (kept in the addendum)."""

    figure: str
    worse: Worse
    result: Call
    baseline_median: float | None
    recent_median: float | None

    def doc(self) -> dict:
        return {**self.result.doc(), "worse": str(self.worse),
                "baseline_median": self.baseline_median, "recent_median": self.recent_median}


def _drop_volatile(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _drop_volatile(v) for k, v in value.items()
                if str(k) not in HOST_VOLATILE}
    if isinstance(value, list | tuple):
        return [_drop_volatile(v) for v in value]
    return value


def host_identity(snapshot: Any) -> str | None:
    """Pure: a digest of what names the host in a snapshot (all but `HOST_VOLATILE`), or
    None for anything that is not a snapshot: two runs on one host have one identity."""
    if not isinstance(snapshot, Mapping) or not snapshot:
        return None
    try:
        text = json.dumps(_drop_volatile(snapshot), sort_keys=True, ensure_ascii=True,
                          allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return None
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def comparable(run: Candidate, other: Candidate, before: datetime) -> bool:
    """Pure: may `other` stand in `run`'s baseline? Accepted, sealed before `before`, and the
    same control, image Id and host identity (none of them unknown)."""
    return (other.run_id != run.run_id and other.status == Status.ACCEPTED
            and run.control is not None and other.control == run.control
            and run.image_id is not None and other.image_id == run.image_id
            and run.host is not None and other.host == run.host
            and other.sealed is not None and other.sealed < before)


class _Tally:
    """Sorts found folders into the baseline, junk (counted by kind, the first named) and
    the other runs of the control; the one sorting `select` and `fill` share."""

    def __init__(self, run: Candidate, before: datetime | None, exclude: Iterable[str],
                 earlier: Selection | None = None) -> None:
        self.run, self.cutoff = run, before or run.sealed
        self.skip = {run.run_id, *exclude}
        self.baseline: list[Candidate] = []
        self.named = list(earlier.left_out) if earlier else []
        self.skipped = dict(earlier.skipped) if earlier else {}
        self.other = earlier.other if earlier else 0

    def add(self, c: Candidate | Unverified) -> bool:
        """Sort one in; True when it is junk."""
        if c.run_id in self.skip:
            return False
        if isinstance(c, Candidate) and c.control != self.run.control:
            c = Unverified(c.run_id, f"its run.json names control {str(c.control)[:64]!r}",
                           Junk.ANOTHER_CONTROL)
        if isinstance(c, Unverified):
            self.skipped[str(c.kind)] = self.skipped.get(str(c.kind), 0) + 1
            if len(self.named) < MAX_NAMED:
                self.named.append(c)
            return True
        if self.cutoff is not None and comparable(self.run, c, self.cutoff):
            self.baseline.append(c)
        else:
            self.other += 1
        return False

    def selection(self, limit: int, unexamined: int = 0, stopped: str | None = None,
                  more: int = 0) -> Selection:
        self.baseline.sort(key=lambda c: (c.sealed, c.run_id), reverse=True)
        over = max(0, len(self.baseline) - limit)
        return Selection(tuple(self.baseline[:limit]), tuple(self.named),
                         self.other + over + more, dict(sorted(self.skipped.items())),
                         unexamined, stopped)


def select(run: Candidate, found: Iterable[Candidate | Unverified], *,
           before: datetime | None = None, exclude: Iterable[str] = (),
           limit: int = MAX_BASELINE) -> Selection:
    """Pure: the newest `limit` runs comparable with `run` sealed before `before` (its own
    seal time by default: a confirmation rerun is compared with its original's baseline),
    newest first, leaving out `exclude`; every folder that is no run of the control
    (unverified, or its run.json names another control) counted as junk, never compared."""
    tally = _Tally(run, before, exclude)
    for c in found:
        tally.add(c)
    return tally.selection(limit)


def fill(run: Candidate, verified: Iterable[Candidate | Unverified], earlier: Selection, *,
         before: datetime | None = None, exclude: Iterable[str] = (),
         limit: int = MAX_BASELINE, max_failed: int) -> Selection:
    """Pure over a lazy sequence: the baseline from `verified`, the verified reading of
    `earlier.baseline` (the folders whose claims read as comparable, newest first by their own
    sealed time), taken one at a time only until `limit` runs stand in it or `max_failed` have
    failed verification. Junk is never counted against `limit`; candidates never reached are
    said as unexamined when failures stopped it."""
    tally = _Tally(run, before, exclude, earlier)
    waiting, failed = len(earlier.baseline), 0
    unexamined, stopped = earlier.unexamined, earlier.stopped
    for c in verified:
        waiting -= 1
        failed += tally.add(c)
        if len(tally.baseline) >= limit:
            return tally.selection(limit, unexamined, stopped, more=waiting)
        if failed >= max_failed and waiting > 0:
            why = (f"verification stopped after {failed} folders whose run.json read as "
                   f"comparable failed it; {waiting} more were not verified")
            return tally.selection(limit, unexamined + waiting,
                                   f"{stopped}; {why}" if stopped else why)
    return tally.selection(limit, unexamined, stopped)


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def figure_calls(recent: Sequence[Candidate], baseline: Sequence[Candidate]) -> list[FigureCall]:
    """Pure: one call per figure of the table that a recent run has a value for, in the
    table's order; the baseline given newest first is compared oldest first."""
    out = []
    oldest_first = list(reversed(baseline))
    for name, worse in DIRECTIONS.items():
        now = [r.figures[name] for r in recent if name in r.figures]
        if not now:
            continue
        before = [b.figures[name] for b in oldest_first if name in b.figures]
        out.append(FigureCall(name, worse, call(now, before, worse), _median(before),
                              _median(now)))
    return out


def uncalled(figures: Mapping[str, float]) -> dict[str, str]:
    """Pure: a run's figures with a value that are not called, each with why."""
    return {n: NOT_CALLED.get(n, NO_DIRECTION) for n in sorted(figures) if n not in DIRECTIONS}


def regressed(calls: Iterable[FigureCall]) -> list[str]:
    """Pure: the figures called a regression."""
    return [c.figure for c in calls if c.result.movement == Movement.REGRESSION]


def confirmation(first: Movement, pair: Movement, rerun: Movement) -> Confirmation | None:
    """Pure: a regression called on a run alone is confirmed only when its run and its rerun
    together (`pair`) are called a regression too, and so is the rerun on its own (`rerun`); nothing
    to confirm otherwise. The pair alone is not enough: one extreme run carries a pair past the
    level with a normal rerun (a one-off would page one night in four)."""
    if first != Movement.REGRESSION:
        return None
    if pair == Movement.REGRESSION and rerun == Movement.REGRESSION:
        return Confirmation.CONFIRMED
    return Confirmation.UNCONFIRMED


def confirmations(first: Iterable[FigureCall], pair: Iterable[FigureCall],
                  rerun: Iterable[FigureCall]) -> dict[str, Confirmation]:
    """Pure: figure -> confirmed/unconfirmed, for each figure the original was called on."""
    with_pair = {c.figure: c.result.movement for c in pair}
    with_rerun = {c.figure: c.result.movement for c in rerun}
    out = {}
    for c in first:
        found = confirmation(c.result.movement,
                             with_pair.get(c.figure, Movement.INSUFFICIENT),
                             with_rerun.get(c.figure, Movement.INSUFFICIENT))
        if found is not None:
            out[c.figure] = found
    return out


METHOD = {"test": "one-sided Mann-Whitney U, exact (harness.judge.regression)",
          "alpha": ALPHA, "min_baseline": MIN_BASELINE, "min_effect": MIN_EFFECT,
          "max_baseline": MAX_BASELINE}


def document(run: Candidate, recent: Sequence[Candidate], selection: Selection,
             calls: Sequence[FigureCall], at: str, **extra: Any) -> dict:
    """Pure: the addendum's `regression.json` (schema harness.regression/v1): every call with the
    medians and sizes it compared, and its inputs, each run id with its seal digest."""
    return {
        "schema": SCHEMA, "run_id": run.run_id, "control": run.control,
        "image_id": run.image_id, "host_identity": run.host, "called_at": at,
        "method": METHOD,
        "recent": [r.ref() for r in recent],
        "baseline": [b.ref() for b in selection.baseline],
        "left_out": [u.doc() for u in selection.left_out],
        "skipped": dict(selection.skipped),
        "not_comparable": selection.other,
        "unexamined": selection.unexamined, "stopped": selection.stopped,
        "figures": {c.figure: c.doc() for c in calls},
        "uncalled": uncalled(run.figures),
        "regressions": regressed(calls),
        "rerun": None, "confirms": None, **extra,
    }

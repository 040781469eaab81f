"""The regression call of a sealed run, read from sealed folders and sealed as an addendum.

The decisions are `harness.judge.comparable`'s (which runs, which figures, which way) and
`harness.judge.regression`'s (the test); this is the I/O around them. Every value a call
rests on is read from a run's own sealed folder, after `verify_folder` passed, as the
bytes its SHA256SUMS vouches for (`SealedReader`); the seal digest named in the addendum is
the sha256 of the very SHA256SUMS those claims came from. The candidates are found by
folder name (a run id is `<control>-<stamp>-<hex>`, harness.base.names.RunId), newest
first, at most `MAX_EXAMINED` of them, so the performance log (a convenience, not
evidence) is never read. The call is written as `addenda/<stamp>-regression/` through the
one addendum writer (atomic, with its own SHA256SUMS; `harness verify` checks it).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.base.atomic import dumps_json
from harness.base.errors import Refused
from harness.base.readfile import InputError, read_bounded
from harness.base.timeutil import iso, parse_or_none
from harness.judge.comparable import (
    ADDENDUM,
    FILE,
    SCHEMA,
    Candidate,
    Confirmation,
    FigureCall,
    Selection,
    Unverified,
    confirmations,
    document,
    figure_calls,
    host_identity,
    regressed,
    select,
)
from harness.judge.finalize.addendum import write_addendum
from harness.judge.finalize.documents import DocumentError
from harness.judge.finalize.observed import SealedReader
from harness.judge.regression import MAX_BASELINE
from harness.measure import perflog
from harness.measure.runfolder import manifest
from harness.measure.runfolder.layout import ADDENDA, HOST_BEFORE, METRICS, SUMS

MAX_EXAMINED = 4 * MAX_BASELINE  # folders of one control verified per call, newest first
MAX_SHOWN = 3  # seal problems named per folder left out
_STAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z")


def run_folders(runs_dir: Path, control: str) -> list[Path]:
    """The folders named as runs of `control`, newest first by the stamp in their name
    (symlinks and other kinds are not run folders); [] when the folder cannot be listed."""
    found = []
    try:
        with os.scandir(runs_dir) as it:
            for e in it:
                head, _, tail = e.name.rpartition("-")
                name, _, when = head.rpartition("-")
                if (name == control and _STAMP.fullmatch(when) and tail
                        and e.is_dir(follow_symlinks=False)):
                    found.append((when, e.name))
    except OSError:
        return []
    return [Path(runs_dir) / n for _, n in sorted(found, reverse=True)[:MAX_EXAMINED]]


def _seal_bytes(run_dir: Path) -> bytes:
    return read_bounded(run_dir / SUMS, manifest.MANIFEST_LIMIT, "seal")


def _problems(run_dir: Path) -> str | None:
    found = manifest.verify_folder(run_dir)
    if not found:
        return None
    shown = "; ".join(str(p) for p in found[:MAX_SHOWN])
    more = f"; and {len(found) - MAX_SHOWN} more" if len(found) > MAX_SHOWN else ""
    return f"its seal does not verify ({shown}{more})"


def read_candidate(run_dir: Path) -> Candidate | Unverified:
    """A run as its sealed folder says, verified first; Unverified naming why not."""
    run_dir = Path(run_dir)
    name = run_dir.name
    try:
        problem = _problems(run_dir)
        if problem is not None:
            return Unverified(name, problem)
        sums = _seal_bytes(run_dir)
        reader = SealedReader(run_dir)
        record = reader.record()
        host, metrics = reader.json(HOST_BEFORE), reader.json(METRICS)
        if _seal_bytes(run_dir) != sums:
            return Unverified(name, "its SHA256SUMS changed while it was read")
    except (Refused, InputError, DocumentError) as e:
        return Unverified(name, getattr(e, "message", None) or str(e))
    if record is None or record.run_id != name:
        return Unverified(name, "its run.json is unreadable or names another run")
    view = record.view()
    figures = {k: float(v) for k, v in perflog.figures(view, metrics).items() if v is not None}
    return Candidate(name, (record.control or {}).get("name"), record.status,
                     (record.image or {}).get("id"), host_identity(host),
                     parse_or_none((record.times or {}).get("sealed")),
                     hashlib.sha256(sums).hexdigest(), figures)


def candidates(runs_dir: Path, control: str | None) -> Iterator[Candidate | Unverified]:
    """Every run folder of `control` under `runs_dir`, read and verified, newest first."""
    if control:
        for folder in run_folders(runs_dir, control):
            yield read_candidate(folder)


@dataclass(frozen=True)
class Called:
    """A run's calls, what they rest on, and (a confirmation rerun's) what it confirmed."""

    run: Candidate
    recent: tuple[Candidate, ...]  # [run], or [original, rerun]
    calls: tuple[FigureCall, ...]
    selection: Selection
    original: Candidate | None = None  # a confirmation rerun's original
    alone: tuple[FigureCall, ...] = ()  # the original's calls on its own
    confirmed: dict[str, Confirmation] = field(default_factory=dict)
    rerun_alone: tuple[FigureCall, ...] = ()  # the rerun's calls on its own

    @property
    def regressions(self) -> list[str]:
        return regressed(self.calls)

    def confirms(self) -> dict | None:
        """The rerun's `confirms`: its original, and each of the original's regression
        calls confirmed or not (None for a run that is no confirmation)."""
        if self.original is None:
            return None
        alone = {c.figure: c for c in self.alone}
        rerun = {c.figure: c.doc() for c in self.rerun_alone}
        return {**self.original.ref(), "figures": {
            name: {"confirmation": str(found), "alone": alone[name].doc(),
                   "rerun_alone": rerun.get(name)}
            for name, found in self.confirmed.items()}}


def call_run(run_dir: Path, runs_dir: Path) -> Called | Unverified:
    """The run alone against the earlier comparable runs (recent = [run])."""
    run = read_candidate(run_dir)
    if isinstance(run, Unverified):
        return run
    selection = select(run, candidates(runs_dir, run.control))
    return Called(run, (run,), tuple(figure_calls([run], selection.baseline)), selection)


def call_rerun(rerun_dir: Path, original_dir: Path, runs_dir: Path) -> Called | Unverified:
    """A confirmation rerun: its original alone, then [original, rerun] and the rerun
    alone, all against the original's baseline (runs sealed before it); each figure the
    original alone was called a regression on is confirmed only when the pair and the
    rerun alone are called one too (`comparable.confirmation`). A rerun on another image
    or host than its original confirms nothing."""
    rerun, original = read_candidate(rerun_dir), read_candidate(original_dir)
    if isinstance(rerun, Unverified):
        return rerun
    if isinstance(original, Unverified):
        return Unverified(rerun.run_id, f"its original {original.run_id}: {original.why}")
    selection = select(original, candidates(runs_dir, original.control),
                       exclude=(rerun.run_id,))
    alone = tuple(figure_calls([original], selection.baseline))
    same = (rerun.image_id, rerun.host) == (original.image_id, original.host)
    pair = (original, rerun) if same else (original,)
    calls = tuple(figure_calls(pair, selection.baseline))
    again = tuple(figure_calls([rerun], selection.baseline)) if same else ()
    confirmed = confirmations(alone, calls, again) if same else dict.fromkeys(
        regressed(alone), Confirmation.UNCONFIRMED)
    return Called(rerun, pair, calls, selection, original, alone, confirmed, again)


def seal(called: Called, run_dir: Path, now: datetime, **extra: object) -> Path:
    """Write the call as the run's `regression` addendum; the folder it made."""
    doc = document(called.run, called.recent, called.selection, called.calls, iso(now),
                   confirms=called.confirms(), **extra)
    return write_addendum(Path(run_dir), ADDENDUM, {FILE: dumps_json(doc).encode()}, now)


_FOLDER = re.compile(r"[0-9]{8}T[0-9]{6}Z-" + ADDENDUM + r"(-[0-9]{1,2})?")


def read_sealed(run_dir: Path) -> dict | None:
    """The run's newest `regression` addendum, read as its own SHA256SUMS vouches for
    (None when it has none, or it does not verify or is not ours)."""
    try:
        with os.scandir(Path(run_dir) / ADDENDA) as it:
            names = sorted(e.name for e in it if _FOLDER.fullmatch(e.name)
                           and e.is_dir(follow_symlinks=False))
    except OSError:
        return None
    for name in reversed(names):
        folder = Path(run_dir) / ADDENDA / name
        try:
            if manifest.verify_folder(folder):
                continue
            doc = SealedReader(folder).json(FILE)
        except (Refused, InputError, DocumentError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            return doc
    return None

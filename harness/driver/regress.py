"""The regression call of a sealed run, read from sealed folders and sealed as an addendum.

The decisions are `judge.comparable`'s and `judge.regression`'s; this is the I/O. Every
value is read from a verified sealed folder as the bytes its SHA256SUMS vouches for
(`SealedReader`); the performance log (a convenience) is never read.

A runs folder is hostile (anyone who can write it can name folders like runs), so a name
only makes a candidate (`scan`), and the work is bounded by what is read: a glance (lstat)
drops junk; a claimed-bytes read of SHA256SUMS, run.json and host-before.json (at most
`MAX_READ` folders, `MAX_READ_BYTES`) sorts out the wrong control, status, image, host or
seal; the rest are verified whole, newest sealed first, until the baseline is full or
`MAX_FAILED` failed. A cap that leaves folders unexamined is said in the addendum."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from harness.base.atomic import dumps_json
from harness.base.errors import Refused
from harness.base.readfile import InputError, read_bounded
from harness.base.timeutil import iso, parse_or_none
from harness.judge.comparable import (
    ADDENDUM,
    FILE,
    Candidate,
    Confirmation,
    FigureCall,
    Junk,
    Selection,
    Unverified,
    confirmations,
    document,
    figure_calls,
    fill,
    host_identity,
    regressed,
    select,
)
from harness.judge.finalize.addendum import write_addendum
from harness.judge.finalize.documents import DocumentError
from harness.judge.finalize.observed import SealedReader
from harness.judge.regression import MAX_BASELINE, MIN_BASELINE, Movement, causes
from harness.measure import perflog
from harness.measure.runfolder import manifest
from harness.measure.runfolder.layout import HOST_BEFORE, METRICS, RECORD, SUMS

# Folders read per call: 100 baselines' worth, beyond a control's own history
MAX_READ = 100 * MAX_BASELINE
MAX_READ_BYTES = 1024**3  # and at most this much of those three files in all
MAX_FAILED = 4 * MAX_BASELINE  # folders that read as comparable yet fail the whole check
MAX_SHOWN = 3  # seal problems named per folder left out
_STAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z")


@dataclass(frozen=True)
class Listing:
    """The entries of a runs folder named as runs of one control."""

    folders: tuple[Path, ...] = ()  # real folders, newest first by the stamp in their name
    junk: tuple[Unverified, ...] = ()  # named so, and no folder


def _stamp(name: str, control: str) -> str | None:
    """The stamp of a folder named as a run of `control` (None: named otherwise)."""
    head, _, tail = name.rpartition("-")
    named, _, when = head.rpartition("-")
    return when if named == control and tail and _STAMP.fullmatch(when) else None


def scan(runs_dir: Path, control: str) -> Listing:
    """The entries of `runs_dir` named as runs of `control` (`ctl` is not `ctl-b`): real
    folders, and anything else as junk; only the listing is read."""
    found, junk = [], []
    try:
        with os.scandir(runs_dir) as it:
            for e in it:
                if (when := _stamp(e.name, control)) is None:
                    continue
                if e.is_dir(follow_symlinks=False):
                    found.append((when, e.name))
                else:
                    kind = "a symlink" if e.is_symlink() else "not a folder"
                    junk.append(Unverified(e.name, kind, Junk.NOT_A_FOLDER))
    except OSError:
        return Listing()
    return Listing(tuple(Path(runs_dir) / n for _, n in sorted(found, reverse=True)),
                   tuple(junk))


def _glance(folder: Path) -> Unverified | int:
    """Junk seen with lstat alone, or how many bytes the read of step 2 will cost."""
    name = folder.name
    sizes = 0
    for rel in (SUMS, RECORD, HOST_BEFORE):
        try:
            st = os.lstat(folder / rel)
        except FileNotFoundError:
            if rel == HOST_BEFORE:
                continue
            if rel == RECORD:
                return Unverified(name, f"no {RECORD}", Junk.UNREADABLE)
            try:
                with os.scandir(folder) as it:
                    empty = next(it, None) is None
            except OSError:
                empty = False
            return (Unverified(name, "an empty folder", Junk.EMPTY) if empty else
                    Unverified(name, f"never sealed: no {SUMS}", Junk.UNSEALED))
        except OSError as e:
            return Unverified(name, f"{rel}: {e.strerror or e}", Junk.UNREADABLE)
        if not stat.S_ISREG(st.st_mode):
            kind = Junk.SEAL_FAILS if rel == SUMS else Junk.UNREADABLE
            return Unverified(name, f"its {rel} is not a regular file", kind)
        sizes += st.st_size
    return sizes


def _seal_bytes(run_dir: Path) -> bytes:
    return read_bounded(run_dir / SUMS, manifest.MANIFEST_LIMIT, "seal")


def _problems(run_dir: Path) -> Unverified | None:
    found = manifest.verify_folder(run_dir)
    if not found:
        return None
    shown = "; ".join(str(p) for p in found[:MAX_SHOWN])
    more = f"; and {len(found) - MAX_SHOWN} more" if len(found) > MAX_SHOWN else ""
    kind = Junk.UNSEALED if any(p.kind == "no-manifest" for p in found) else Junk.SEAL_FAILS
    return Unverified(run_dir.name, f"its seal does not verify ({shown}{more})", kind)


def _read(run_dir: Path, whole: bool) -> Candidate | Unverified:
    """The run as its folder says, each file read only as SHA256SUMS claims it; verified
    whole first when `whole` (else a claims-only read that only sorts folders out)."""
    name = run_dir.name
    try:
        if whole and (problem := _problems(run_dir)) is not None:
            return problem
        sums = _seal_bytes(run_dir) if whole else b""
        reader = SealedReader(run_dir)
        if not reader.claims(RECORD):
            return Unverified(name, f"its {SUMS} does not vouch for a {RECORD}")
        record = reader.record()
        host = reader.json(HOST_BEFORE)
        metrics = reader.json(METRICS) if whole else None
        if whole and _seal_bytes(run_dir) != sums:
            return Unverified(name, f"its {SUMS} changed while it was read")
    except Refused as e:
        return Unverified(name, getattr(e, "message", None) or str(e))
    except (InputError, DocumentError) as e:
        return Unverified(name, getattr(e, "message", None) or str(e), Junk.UNREADABLE)
    if record is None or record.run_id != name:
        return Unverified(name, f"its {RECORD} is unreadable or names another run",
                          Junk.UNREADABLE)
    figures = {k: float(v) for k, v in perflog.figures(record.view(), metrics).items()
               if v is not None} if whole else {}
    return Candidate(name, (record.control or {}).get("name"), record.status,
                     (record.image or {}).get("id"), host_identity(host),
                     parse_or_none((record.times or {}).get("sealed")),
                     hashlib.sha256(sums).hexdigest() if whole else "", figures)


def read_candidate(run_dir: Path) -> Candidate | Unverified:
    """A run as its sealed folder says, verified first; Unverified naming why not."""
    return _read(Path(run_dir), whole=True)


class _Reads:
    """Step 2 of `choose`: junk, glances, then the claims read of those worth it, cheapest
    first (so large look-alikes cannot spend the budget), within the caps."""

    def __init__(self, listing: Listing, max_read: int, max_read_bytes: int) -> None:
        self.listing, self.max_read, self.max_bytes = listing, max_read, max_read_bytes
        self.unread = 0

    def __iter__(self) -> Iterator[Candidate | Unverified]:
        yield from self.listing.junk
        worth = []
        for i, folder in enumerate(self.listing.folders):  # newest name first on a tie
            glance = _glance(folder)
            if isinstance(glance, Unverified):
                yield glance
            else:
                worth.append((glance, i, folder))
        read = spent = 0
        for cost, _, folder in sorted(worth):
            if read >= self.max_read or spent + cost > self.max_bytes:
                self.unread += 1
                continue
            read, spent = read + 1, spent + cost
            yield _read(folder, whole=False)


def choose(run: Candidate, runs_dir: Path, *, exclude: Iterable[str] = (),
           max_read: int = MAX_READ, max_read_bytes: int = MAX_READ_BYTES,
           max_failed: int = MAX_FAILED) -> Selection:
    """The baseline of `run` (earlier comparable runs that verify, newest first, at most
    MAX_BASELINE), in the module's three steps; the rest counted as junk."""
    if not run.control:
        return Selection(())
    reads = _Reads(scan(runs_dir, run.control), max_read, max_read_bytes)
    sorted_out = select(run, reads, exclude=exclude, limit=len(reads.listing.folders))
    if reads.unread:
        sorted_out = replace(sorted_out, unexamined=reads.unread, stopped=(
            f"{reads.unread} folders named as runs of {run.control} were not read: the cap "
            f"of {max_read} folders or {max_read_bytes} bytes read per call was reached"))
    verified = (read_candidate(Path(runs_dir) / c.run_id) for c in sorted_out.baseline)
    return fill(run, verified, sorted_out, exclude=exclude, max_failed=max_failed)


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

    @property
    def said(self) -> list[str] | str:
        """What the night's line says of the call: each regression once, with the figures
        that moved with it; or that nothing was judged, and on how few earlier runs (`none`
        would claim a judgement never made)."""
        if all(c.result.movement == Movement.INSUFFICIENT for c in self.calls):
            return f"not judged: {len(self.selection.baseline)} of {MIN_BASELINE} earlier runs"
        return [f + (f" ({', '.join(moved)} moved with it)" if moved else "")
                for f, moved in causes(self.regressions).items()]

    def confirms(self) -> dict | None:
        """The rerun's `confirms`: each regression of its original, confirmed or not."""
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
    selection = choose(run, runs_dir)
    return Called(run, (run,), tuple(figure_calls([run], selection.baseline)), selection)


def call_rerun(rerun_dir: Path, original_dir: Path, runs_dir: Path) -> Called | Unverified:
    """A confirmation rerun: each regression of its original alone is confirmed only when
    [original, rerun] and the rerun alone are called one too, against the original's
    baseline. A rerun on another image or host confirms nothing."""
    rerun, original = read_candidate(rerun_dir), read_candidate(original_dir)
    if isinstance(rerun, Unverified):
        return rerun
    if isinstance(original, Unverified):
        return Unverified(rerun.run_id, f"its original {original.run_id}: {original.why}")
    selection = choose(original, runs_dir, exclude=(rerun.run_id,))
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

"""`harness ls`: one row per run folder in a runs dir, newest first, like `docker ps -a`.

Fast over a thousand runs: two bounded reads a folder and one hash of run.json against its
seal's claim, never a whole re-hash (`harness verify` does that). Nothing is hidden: no
seal is `running` while its launcher (harness.json: pid, start time, host) is alive, else
`unsealed`; an unreadable run.json `unreadable`, a mismatched one `not-intact`.

`ls --nights` lists the night folders (RUNS/nights) the same way: state, controls
accepted from summary.json, and how many attempts were retries or reruns."""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_bounded
from harness.base.states import State, Status
from harness.base.timeutil import parse_or_none
from harness.measure.nightfolder.holder import launcher_alive, night_running, read_night_holder
from harness.measure.nightfolder.naming import ENDED, NIGHTS, night_names, night_parts
from harness.measure.runfolder import manifest, runjson
from harness.measure.runfolder.layout import RECORD, SUMS
from harness.measure.runfolder.refs import newest_first, run_names, run_parts
from harness.measure.runfolder.reruns import fold_index, index_lines, original_id
from harness.readers.report.ending import summary_bytes
from harness.readers.report.runline import (
    NONE,
    age,
    aligned,
    field,
    links,
    seconds_text,
    stamp_time,
)

RUNNING = State.RUNNING.value  # no SHA256SUMS, and the harness that writes it is alive
UNSEALED = "unsealed"  # no SHA256SUMS, its writer gone: left by a killed harness
UNREADABLE = "unreadable"  # run.json missing, too big, not JSON or not a record
NOT_INTACT = "not-intact"  # run.json is not the bytes its SHA256SUMS vouches for
LISTING_WORDS = (RUNNING, UNSEALED, UNREADABLE, NOT_INTACT)
RECORD_READ_LIMIT = 1024 * 1024  # a run.json is a few KiB; a bigger one is not listed as read
SUMS_READ_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class Listed:
    """One run folder as `ls` shows it (every text from the folder, not yet made inert)."""

    run_id: str
    status: str
    control: str | None = None
    campaign: str | None = None
    started: str | None = None
    ended: str | None = None
    attempt: int | None = None
    rerun_of: str | None = None
    superseded_by: str | None = None
    path: str = ""

    def stamp(self) -> str:
        """The UTC stamp in the run id (what `newest first` sorts by)."""
        parts = run_parts(self.run_id)
        return parts[1] if parts else ""

    def duration_s(self) -> float | None:
        start, end = parse_or_none(self.started), parse_or_none(self.ended)
        return None if start is None or end is None else (end - start).total_seconds()

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "duration_s": self.duration_s()}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def row_of(name: str, path: str, record_bytes: bytes | None, sums_bytes: bytes | None,
           alive: bool = False) -> Listed:
    """One folder's row from its run.json and SHA256SUMS bytes (None: absent or unreadable);
    `alive`: its launcher runs (`launcher_alive`). Pure."""
    control = run_parts(name)[0] if run_parts(name) else None
    open_word = RUNNING if alive else UNSEALED
    if record_bytes is None:
        return Listed(name, open_word if sums_bytes is None else UNREADABLE, control, path=path)
    try:
        rec = runjson.from_dict(runjson.parse(record_bytes, f"{name}/{RECORD}"))
    except (InvalidInput, ValueError, TypeError, AttributeError):  # hostile or damaged
        return Listed(name, UNREADABLE, control, path=path)
    times = rec.times if isinstance(rec.times, dict) else {}
    of = rec.rerun_of.get("run_id") if isinstance(rec.rerun_of, dict) else None
    row = Listed(name, str(rec.status) if rec.status else UNREADABLE,
              _text((rec.control or {}).get("name")) or control,
              _text((rec.campaign or {}).get("name")), _text(times.get("started")),
              _text(times.get("ended")), rec.attempt, _text(of), path=path)
    if sums_bytes is None:
        return replace(row, status=open_word)
    claims = dict(manifest.parse(sums_bytes)[0])
    if claims.get(RECORD) != hashlib.sha256(record_bytes).hexdigest():
        return replace(row, status=NOT_INTACT)
    return row


def mark_reruns(rows: Sequence[Listed], index_lines: Sequence[str]) -> list[Listed]:
    """Each row with the rerun it was superseded by and the run it reruns."""
    folded = fold_index(list(index_lines))
    later: dict[str, tuple[str, str]] = {}
    earlier: dict[str, str] = {}
    for rerun_id, entry in folded.items():
        orig_id = original_id(entry)
        if orig_id is not None:
            at = str(entry.get("at") or "")
            if orig_id not in later or later[orig_id][0] <= at:
                later[orig_id] = (at, rerun_id)
            earlier[rerun_id] = orig_id
    return [replace(r, superseded_by=later.get(r.run_id, ("", r.superseded_by))[1],
                    rerun_of=r.rerun_of or earlier.get(r.run_id)) for r in rows]


def select(rows: Sequence[Listed], *, campaign: str | None = None, control: str | None = None,
           status: Sequence[str] = (), since: datetime | None = None,
           last: int | None = None) -> list[Listed]:
    """The rows the filters keep, newest first (at most `last`). Pure."""
    ordered = sorted(rows, key=lambda r: (r.stamp(), r.run_id), reverse=True)
    kept = [r for r in ordered
            if (campaign is None or r.campaign == campaign)
            and (control is None or r.control == control)
            and (not status or r.status in status)
            and (since is None or ((at := _started(r)) is not None and at >= since))]
    return kept[:last] if last is not None else kept


def _started(row: Listed) -> datetime | None:
    # an unreadable row still has the time its id was minted
    return parse_or_none(row.started) or stamp_time(row.stamp())


HEADER = ("RUN ID", "CONTROL", "CAMPAIGN", "STATUS", "STARTED", "DURATION", "ATTEMPT",
          "RERUN")


def cells(row: Listed, now: datetime) -> tuple[str, ...]:
    """One row's table cells, each inert and bounded. Pure."""
    return tuple(field(v) for v in (
        row.run_id, row.control, row.campaign, row.status, age(_started(row), now),
        seconds_text(row.duration_s(), NONE), row.attempt, links(row.rerun_of, row.superseded_by)))


def render(rows: Sequence[Listed], now: datetime) -> list[str]:
    """The table: a header and one line per row, columns padded as `docker ps` does."""
    return aligned(HEADER, [cells(r, now) for r in rows])


def as_json(rows: Sequence[Listed | NightListed]) -> str:
    """The rows as one JSON list (ASCII only: no control character reaches a terminal)."""
    return json.dumps([r.as_json() for r in rows], indent=2, sort_keys=True, ensure_ascii=True)


def _bytes(path: Path, limit: int) -> bytes | None:
    try:
        return read_bounded(path, limit, what="run file")
    except InputError:
        return None


def read_rows(runs_dir: Path) -> list[Listed]:
    """Every run folder of `runs_dir` as a row, linked to its reruns (OSError when the runs
    dir itself cannot be read)."""
    rows, host = [], socket.gethostname()
    for name in newest_first(run_names(runs_dir)):
        folder = Path(runs_dir) / name
        sums = _bytes(folder / SUMS, SUMS_READ_LIMIT)
        alive = sums is None and launcher_alive(folder, host)
        rows.append(row_of(name, str(folder), _bytes(folder / RECORD, RECORD_READ_LIMIT),
                           sums, alive))
    return mark_reruns(rows, index_lines(runs_dir))


# ---- nights ---------------------------------------------------------------------------------

DONE, STOPPED = "done", Status.INTERRUPTED.value  # ended on purpose (ended.json); neither
NIGHT_HEADER = ("NIGHT ID", "CAMPAIGN", "STATE", "STARTED", "ACCEPTED", "RETRIES", "RERUNS")


@dataclass(frozen=True)
class NightListed:
    """One night folder as `ls --nights` shows it (texts from the folder, not yet inert)."""

    night_id: str
    campaign: str
    started: str  # the UTC stamp of its name
    state: str  # RUNNING, DONE or STOPPED
    accepted: int | None = None  # controls whose final attempt was accepted (summary.json)
    controls: int | None = None
    retries: int = 0  # final attempts that came after a retry
    reruns: int = 0  # final attempts that came after a rerun
    path: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def night_row(name: str, path: str, state: str, summary_bytes: bytes | None) -> NightListed:
    """One night's row from its state and summary.json bytes (None: not written yet). Pure."""
    campaign, stamp = night_parts(name) or (name, "")
    row = NightListed(name, campaign, stamp, state, path=path)
    try:
        doc = json.loads(summary_bytes) if summary_bytes is not None else None
    except (ValueError, RecursionError):
        doc = None
    tallied = doc.get("controls") if isinstance(doc, dict) else None
    if not isinstance(tallied, dict):
        return row
    final, after = tallied.get("final"), tallied.get("after")
    kinds = [k for k in after.values() if isinstance(k, dict)] if isinstance(after, dict) else []
    return replace(row, controls=_int(tallied.get("controls")),
                   accepted=_int(final.get(Status.ACCEPTED)) if isinstance(final, dict) else None,
                   retries=sum(_int(n) or 0 for k in kinds for how, n in k.items()
                               if how == "retry"),
                   reruns=sum(_int(n) or 0 for k in kinds for how, n in k.items()
                              if how != "retry"))  # a rerun, or one to confirm a call


def read_night_rows(runs_dir: Path, gpu_lock: Path) -> list[NightListed]:
    """Every night folder of RUNS/nights, newest first (OSError when it cannot be read);
    `gpu_lock`: the lock whose night lock says which night runs."""
    nights = Path(runs_dir) / NIGHTS
    holder, host, rows = read_night_holder(gpu_lock), socket.gethostname(), []
    for name in newest_first(night_names(nights), night_parts):
        folder = nights / name  # running first: a rerun may write into a night that ended
        state = (RUNNING if night_running(folder, holder, host) else
                 DONE if os.path.lexists(folder / ENDED) else STOPPED)
        try:
            summary: bytes | None = summary_bytes(folder)
        except InputError:
            summary = None  # listed without its counts
        rows.append(night_row(name, str(folder), state, summary))
    return rows


def night_cells(row: NightListed, now: datetime) -> tuple[str, ...]:
    """One night's table cells, each inert and bounded. Pure."""
    accepted = None if row.controls is None else f"{field(row.accepted)}/{row.controls}"
    return tuple(field(v) for v in (row.night_id, row.campaign, row.state,
                                    age(stamp_time(row.started), now), accepted,
                                    row.retries, row.reruns))


def render_nights(rows: Sequence[NightListed], now: datetime) -> list[str]:
    return aligned(NIGHT_HEADER, [night_cells(r, now) for r in rows])

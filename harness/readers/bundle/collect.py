"""`bundle collect`: the controller's side of the drop, where hosts leave their runs.

One rule (`drop_run`, `admits`) decides what a drop bundle may place, for the command and
the night alike: `<run-id>.tar.gz` places that run and nothing else; another name, a
non-regular file, or a bundle holding another run or more is refused whole. So a forged
copy of R in another file never takes R's place ahead of the genuine `R.tar.gz`.
A bundle is hostile: opened once (never through a symlink), hashed, unpacked from that
same file, verified, then renamed into place, so RUNS never holds half a run. A run RUNS
already holds is left as it is (evidence is append-only); a differing seal is a conflict."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

from harness.base.atomic import append_bytes, dumps_json, fsync_dir
from harness.base.catalogue import BUNDLE_DROP_NAME, BUNDLE_DROP_OTHER_RUN
from harness.base.errors import InvalidInput
from harness.base.names import RunId
from harness.base.readfile import InputError, read_bounded
from harness.base.timeutil import utc_now
from harness.measure.runfolder import layout
from harness.readers.bundle import bag
from harness.readers.bundle.export import SUFFIXES
from harness.readers.bundle.facts import read_run_facts
from harness.readers.bundle.records import parse_json
from harness.readers.bundle.safe_extract import open_archive
from harness.readers.bundle.sums import one_line
from harness.readers.bundle.trust import Policy
from harness.readers.bundle.verify import verify_archive

BUNDLES = "bundles"  # <drop>/bundles/<run-id>.tar.gz
RECORD = "collected.jsonl"  # in RUNS
RECORD_LIMIT = 64 << 20
DROP_SUFFIX = ".tar.gz"  # what a host's job exports: <drop>/bundles/<run-id>.tar.gz


@dataclass
class Arrival:
    """One bundle found in the drop, and what collect did with it."""

    bundle: str
    sha256: str
    ok: bool = False
    runs: list[str] = field(default_factory=list)
    unpacked: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # already in RUNS, same seal
    problems: list[str] = field(default_factory=list)

    def record(self) -> dict:
        return {**asdict(self), "collected": utc_now()}


def collected_digests(text: str) -> set[str]:
    """The sha256 of each bundle a collect took whole (ok, no problem). Pure; a line that is not
    such a record is ignored, so a damaged line only means collecting again."""
    return {e["sha256"] for e in _entries(text) if e.get("ok") is True and not e.get("problems")}


def _entries(text: str) -> list[dict]:
    """The record's lines that name a bundle digest. Pure."""
    found = []
    for line in text.splitlines():
        try:
            entry = parse_json(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
            found.append(entry)
    return found


def drop_run(name: str) -> str | None:
    """The run a file in the drop's bundles/ is named for: R for `R.tar.gz` (R a plain run id), None
    for any other name. The one name a host's job exports a run under, so no two files
    of the drop claim one run. Pure."""
    run_id = name.removesuffix(DROP_SUFFIX)
    return run_id if name.endswith(DROP_SUFFIX) and RunId.valid(run_id) else None


def admits(run_id: str, runs: list[str], folders: list[str], recorded: object) -> str | None:
    """Why the verified bundle named for `run_id` may place nothing, or None when it holds that run
    and nothing else: `runs`, its run folders (data/...); `folders`, the folders at the top of its
    data/; `recorded`, the run id its run's run.json gives (None: it gives none)."""
    alone = runs == [f"{bag.PAYLOAD_DIR}/{run_id}"] and folders == [run_id]
    if alone and recorded in (None, run_id):
        return None
    if alone:
        held = f"a run whose run.json calls it {one_line(str(recorded))[:120]}"
    else:  # its runs, and any other folder it would bring (a night's, say)
        named = runs + [f"{bag.PAYLOAD_DIR}/{f}" for f in folders
                        if f"{bag.PAYLOAD_DIR}/{f}" not in runs]
        held = ", ".join(one_line(r) for r in named[:5]) or "no run"
    return (f"{BUNDLE_DROP_OTHER_RUN}: the bundle named after run {run_id} holds {held}; "
            "nothing unpacked")


def drop_bundles(drop: Path) -> list[Path]:
    """What may be a finished bundle in `<drop>/bundles`, by name: each entry with a bundle suffix
    that is not a dot-name (a bundle still being written). A symlink or non-regular file is
    listed too, so that it is refused by name, never followed."""
    folder = drop / BUNDLES
    if not folder.is_dir():
        raise InvalidInput(f"{one_line(str(folder))}: no such folder (the drop's bundles)")
    return [folder / name for name in sorted(os.listdir(folder))
            if not name.startswith(".") and name.endswith(SUFFIXES)]


def _read_record(runs_dir: Path) -> str:
    path = runs_dir / RECORD
    if not os.path.lexists(path):
        return ""
    try:  # judged on what is opened: a FIFO swapped in after a look would hang the read
        return read_bounded(path, RECORD_LIMIT, "collect record").decode("utf-8", "replace")
    except InputError as e:
        raise InvalidInput(f"{one_line(e.message)} (a collect record is a regular file)") \
            from None


def _append(runs_dir: Path, arrival: Arrival) -> None:
    line = dumps_json(arrival.record()).replace("\n", "") + "\n"
    try:
        append_bytes(runs_dir / RECORD, line.encode("utf-8"))
    except OSError as e:
        raise InvalidInput(f"{one_line(str(runs_dir / RECORD))}: not a collect record (a "
                           f"regular file): {e.strerror or e}") from None


def _unpack_runs(root: Path, runs: list[str], runs_dir: Path, arrival: Arrival) -> None:
    for run in runs:
        run_id = run.removeprefix(f"{bag.PAYLOAD_DIR}/")
        arrival.runs.append(run_id)
        if "/" in run_id:  # a night's run nested in its folder: collect takes plain runs
            arrival.problems.append(f"{run}: not a run at the top of the bundle; not unpacked")
            continue
        there = runs_dir / run_id
        if os.path.lexists(there):
            mine = (root / run / layout.SUMS).read_bytes()
            same = there.is_dir() and not there.is_symlink() \
                and (there / layout.SUMS).is_file() and (there / layout.SUMS).read_bytes() == mine
            if same:
                arrival.present.append(run_id)
            else:
                arrival.problems.append(f"{run_id}: RUNS holds a different run of this id")
            continue
        os.rename(root / run, there)  # unpacked inside RUNS: one rename puts it in place
        fsync_dir(runs_dir)
        arrival.unpacked.append(run_id)


def _refusal(root: Path, run_id: str, runs: list[str]) -> str | None:
    """`admits`, over what the unpacked, verified bundle at `root` holds."""
    data = root / bag.PAYLOAD_DIR
    folders = sorted(os.listdir(data)) if data.is_dir() else []
    recorded = None
    if runs == [f"{bag.PAYLOAD_DIR}/{run_id}"]:
        recorded = read_run_facts(runs[0], root / runs[0], record_only=True).record.get(
            "run_id")
    return admits(run_id, runs, folders, recorded)


def _collect_one(path: Path, opened: BinaryIO, digest: str, runs_dir: Path,
                 policy: Policy | None, run_id: str) -> Arrival:
    """Unpack the open bundle file into a dot-folder inside RUNS (never a run: no owner file
    at its top, and removed on the way out), verify it, and rename its run into place when
    it holds the run `run_id` it is named for and nothing else (refused whole otherwise)."""
    arrival = Arrival(one_line(path.name), digest)
    with tempfile.TemporaryDirectory(prefix=".harness-collect-", dir=runs_dir) as tmp:
        try:
            root, report = verify_archive(path, Path(tmp), policy, opened=opened)
            if not report.ok:
                arrival.problems += [one_line(str(p)) for p in report.problems]
                return arrival
            if (why := _refusal(root, run_id, report.runs)) is not None:
                arrival.problems.append(why)
                return arrival
            arrival.ok = True
            _unpack_runs(root, report.runs, runs_dir, arrival)
        except InvalidInput as e:
            arrival.problems.append(str(e))
        except OSError as e:  # a full disk, a folder that appeared meanwhile
            arrival.problems.append(one_line(f"{type(e).__name__}: {e}"))
    return arrival


def _take(path: Path, runs_dir: Path, policy: Policy | None, run_id: str,
          skip: set[str]) -> Arrival | None:
    """Open the drop's bundle once and, unless its digest is in `skip`, collect it and append
    its arrival to the record (None when skipped). InvalidInput for a symlink, a FIFO or a
    folder: never followed nor read."""
    with open_archive(path) as (fh, digest):
        if digest in skip:
            return None
        arrival = _collect_one(path, fh, digest, runs_dir, policy, run_id)
    _append(runs_dir, arrival)
    return arrival


def _unnamed(path: Path, why: str) -> Arrival:
    """A drop entry refused by its name or kind, unread (so with no digest, not recorded)."""
    return Arrival(one_line(path.name), "", problems=[f"{BUNDLE_DROP_NAME}: {one_line(why)}"])


def collect_drop(drop: Path, runs_dir: Path, allowed_signers: Path | None = None
                 ) -> list[Arrival]:
    """Collect every bundle in the drop not collected before; one Arrival for each, each
    appended to RUNS/collected.jsonl as it is done (so a crash loses no record)."""
    drop, runs_dir = Path(drop), Path(runs_dir)
    policy = Policy.given(allowed_signers)
    runs_dir.mkdir(parents=True, exist_ok=True)
    done = collected_digests(_read_record(runs_dir))
    arrivals = []
    for path in drop_bundles(drop):
        run_id = drop_run(path.name)
        if run_id is None:
            arrivals.append(_unnamed(path, f"not named <run-id>{DROP_SUFFIX}, so named for "
                                           "no run; not read"))
            continue
        try:
            arrival = _take(path, runs_dir, policy, run_id, done)
        except InvalidInput as e:
            arrivals.append(_unnamed(path, e.message))
            continue
        if arrival is not None:
            done.add(arrival.sha256)
            arrivals.append(arrival)
    return arrivals


def collect_run(drop: Path, runs_dir: Path, run_id: str) -> Arrival | None:
    """The controller's collect of one run as its job ends: `<drop>/bundles/<run id>.tar.gz`,
    verified, and taken only when it holds that run and nothing else (`admits`, the rule
    `collect_drop` applies too: a host's bundle never plants another host's run). None while
    no such bundle is there, or when this very bundle was collected or refused before."""
    name = f"{run_id}{DROP_SUFFIX}"
    if drop_run(name) != run_id:
        raise InvalidInput(f"not a run id: {one_line(run_id)[:120]!r}")
    path = Path(drop) / BUNDLES / name
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # as drop_bundles: never followed
            return None
    except FileNotFoundError:
        return None
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    seen = {e["sha256"] for e in _entries(_read_record(runs_dir))}
    try:
        return _take(path, runs_dir, None, run_id, seen)
    except InvalidInput:  # swapped for a symlink or a FIFO since: not arrived
        return None


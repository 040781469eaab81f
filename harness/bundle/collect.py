"""`bundle collect`: the controller's side of the drop, where hosts leave their runs.

Under Slurm each host seals a run on its own disk, then its job exports the run as a bundle
to `<drop>/bundles/<run-id>.tar.gz` (written to a dot-name, then linked into place: a
bundle in the drop is whole). Collect takes each bundle there that it has not collected
yet (by its sha256), verifies it as `bundle verify` does, records the digest in
`RUNS/collected.jsonl` (one JSON object a line, appended and fsynced: what arrived, when,
and what was done with it), and moves each of its runs that RUNS does not hold yet into
RUNS. A host that could not reach the drop keeps its sealed runs; once their bundles
appear, a later collect picks them up.

A bundle is hostile: it is unpacked by `safe_extract` into a dot-folder inside RUNS and
must verify before any run of it takes its place; each run is then renamed into place, so
RUNS never holds half a run. A run RUNS already holds is left as it is (evidence is
append-only), and one whose seal differs from the bundle's is a conflict.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness.atomic import dumps_json, fsync_dir
from harness.bundle import bag
from harness.bundle.export import compression_for
from harness.bundle.merge import file_sha256
from harness.bundle.records import parse_json
from harness.bundle.safe_extract import Limits, safe_extract
from harness.bundle.sums import one_line
from harness.bundle.verify import verify_tree
from harness.errors import InvalidInput
from harness.runfolder import layout
from harness.timeutil import utc_now

BUNDLES = "bundles"  # <drop>/bundles/<run-id>.tar.gz
RECORD = "collected.jsonl"  # in RUNS
RECORD_LIMIT = 64 << 20
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # one path component, no dot-name


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
        return {"bundle": self.bundle, "sha256": self.sha256, "ok": self.ok,
                "runs": self.runs, "unpacked": self.unpacked, "present": self.present,
                "problems": self.problems, "collected": utc_now()}


def collected_digests(text: str) -> set[str]:
    """The sha256 of each bundle a collect took whole (ok, no problem). Pure; a line that
    is not such a record is ignored, so a damaged line only means collecting again."""
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


def drop_bundles(drop: Path) -> list[Path]:
    """The finished bundles in `<drop>/bundles`, by name: regular files with a bundle
    suffix, not a dot-name (a bundle still being written). A symlink is never followed."""
    folder = drop / BUNDLES
    if not folder.is_dir():
        raise InvalidInput(f"{one_line(str(folder))}: no such folder (the drop's bundles)")
    found = []
    for name in sorted(os.listdir(folder)):
        path = folder / name
        if name.startswith(".") or not stat.S_ISREG(os.lstat(path).st_mode):
            continue
        try:
            compression_for(path)
        except InvalidInput:
            continue
        found.append(path)
    return found


def _read_record(runs_dir: Path) -> str:
    path = runs_dir / RECORD
    if not path.exists():
        return ""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > RECORD_LIMIT:
        raise InvalidInput(f"{one_line(str(path))}: not a collect record (a regular file)")
    return path.read_text(encoding="utf-8", errors="replace")


def _append(runs_dir: Path, arrival: Arrival) -> None:
    line = dumps_json(arrival.record()).replace("\n", "") + "\n"
    fd = os.open(runs_dir / RECORD, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _place(run: Path, runs_dir: Path, run_id: str) -> None:
    """Move the verified run (unpacked inside RUNS, so this is one rename) into place."""
    os.rename(run, runs_dir / run_id)
    fsync_dir(runs_dir)


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
        _place(root / run, runs_dir, run_id)
        arrival.unpacked.append(run_id)


def _collect_one(path: Path, digest: str, runs_dir: Path, allowed_signers: Path | None,
                 limits: Limits | None, only: str | None = None) -> Arrival:
    """Unpack into a dot-folder inside RUNS (never a run: no owner file at its top, and
    removed on the way out), verify, then rename each new run into place. With `only`, a
    bundle holding anything but that one run is refused whole."""
    arrival = Arrival(one_line(path.name), digest)
    with tempfile.TemporaryDirectory(prefix=".harness-collect-", dir=runs_dir) as tmp:
        try:
            root = safe_extract(path, Path(tmp), limits)
            report = verify_tree(root, allowed_signers)
            if not report.ok:
                arrival.problems += [one_line(str(p)) for p in report.problems]
                return arrival
            if only is not None and report.runs != [f"{bag.PAYLOAD_DIR}/{only}"]:
                held = ", ".join(one_line(r) for r in report.runs[:5]) or "no run"
                arrival.problems.append(f"the bundle named after run {only} holds {held}; "
                                        "nothing unpacked")
                return arrival
            arrival.ok = True
            _unpack_runs(root, report.runs, runs_dir, arrival)
        except InvalidInput as e:
            arrival.problems.append(str(e))
        except OSError as e:  # a full disk, a folder that appeared meanwhile
            arrival.problems.append(one_line(f"{type(e).__name__}: {e}"))
    return arrival


def collect_drop(drop: Path, runs_dir: Path, allowed_signers: Path | None = None,
                 limits: Limits | None = None) -> list[Arrival]:
    """Collect every bundle in the drop not collected before; one Arrival for each, each
    appended to RUNS/collected.jsonl as it is done (so a crash loses no record)."""
    drop, runs_dir = Path(drop), Path(runs_dir)
    if allowed_signers is not None and not Path(allowed_signers).is_file():
        raise InvalidInput(f"allowed-signers file {one_line(str(allowed_signers))} "
                           "is not a file")
    runs_dir.mkdir(parents=True, exist_ok=True)
    done = collected_digests(_read_record(runs_dir))
    arrivals = []
    for path in drop_bundles(drop):
        digest = file_sha256(path)
        if digest in done:
            continue
        arrival = _collect_one(path, digest, runs_dir, allowed_signers, limits)
        _append(runs_dir, arrival)
        done.add(digest)
        arrivals.append(arrival)
    return arrivals


def collect_run(drop: Path, runs_dir: Path, run_id: str,
                allowed_signers: Path | None = None,
                limits: Limits | None = None) -> Arrival | None:
    """The controller's collect of one run as its job ends: `<drop>/bundles/<run id>.tar.gz`,
    verified, and taken only when it holds that run and nothing else (a host's bundle
    never plants another host's run). None while no such bundle is there, or when this
    very bundle was collected or refused before (RUNS/collected.jsonl says so)."""
    if not RUN_NAME.fullmatch(run_id):
        raise InvalidInput(f"not a run id: {one_line(run_id)[:120]!r}")
    path = Path(drop) / BUNDLES / f"{run_id}.tar.gz"
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # as drop_bundles: never followed
            return None
    except FileNotFoundError:
        return None
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    digest = file_sha256(path)
    if any(e["sha256"] == digest for e in _entries(_read_record(runs_dir))):
        return None
    arrival = _collect_one(path, digest, runs_dir, allowed_signers, limits, only=run_id)
    _append(runs_dir, arrival)
    return arrival


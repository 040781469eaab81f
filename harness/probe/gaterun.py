"""`harness gates`: run a campaign's gates in order and seal what they showed.

Each gate runs without a shell in its own process group (killed whole at its timeout),
with no ssh-agent (code under test must not sign an approval); of its scratch folder only
the JUnit file its `expect` names is copied, bounded, so nothing a gate leaves can make
the record unsealable. The seal and the checkout's cleanliness are taken before the first
gate and after each: a change is a refusal in the record (GATES-SEAL-CHANGED), so `passed`
is never true of a run `gates` refused. A record written into by anything else is left
unsealed (GATES-TAMPERED). Exit: 0 passed; 1 a gate failed or a refusal; 2 bad input;
3 a command could not start or the record not be written; 130 interrupted (what ran is
still sealed)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from harness.base.atomic import dumps_json, write_json
from harness.base.catalogue import GATES_TAMPERED
from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.base.timeutil import stamp, utc_now
from harness.base.tree import (
    NotRegular,
    TooMany,
    open_beneath,
    open_regular,
    printable,
    walk,
)
from harness.config.gatelist import GATE_DIR_ENV, GATE_DIR_TOKEN, Gate
from harness.config.loader import Loaded
from harness.judge.gaterecord.gatesjson import GATE_RECORD, GATES_DIR, SCHEMA, verdict
from harness.judge.gaterecord.onegate import MAX_JUNIT, GateRun, judge
from harness.judge.gaterecord.outcome import exit_code, gate_entry, joined, refusals_of, select
from harness.measure.provenance import CleanCheck, clean_at
from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import make_read_only, write_manifest
from harness.measure.seal import SourceSeal, source_files, source_seal

MAX_LOG = 64 * 1024 * 1024
KILL_TAIL = 1024 * 1024  # the kill score line is looked for in the last MiB of stdout
AGENT_ENV = frozenset({"SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO"})
GRACE_S = 10.0  # after a kill, how long the copiers may take to see the pipes close


def _copy(src: BinaryIO, dest: Path, stop: threading.Event | None = None) -> None:
    """Copy a pipe into `dest`, at most MAX_LOG bytes; nothing once `stop` is set."""
    kept = dropped = 0
    stop = stop or threading.Event()
    with open(dest, "xb", buffering=0) as out:  # unbuffered: the log is live
        while chunk := src.read1(1 << 16):  # what is there, not a full 64 KiB
            if stop.is_set():
                continue  # drained, never written: the log may be sealed by now
            room = MAX_LOG - kept
            out.write(chunk[:room])
            kept += min(room, len(chunk))
            dropped += max(0, len(chunk) - room)
        if dropped and not stop.is_set():
            out.write(f"\n[harness: {dropped} more bytes not kept]\n".encode())


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(path: Path) -> str:
    """The end of the gate's stdout log, as the copier wrote it. The gate may have swapped
    that name for a link or a FIFO (its record folder is findable): neither is followed or
    waited on, and the gate then has no stdout to be judged by."""
    try:
        fd = open_regular(path)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        f.seek(max(0, os.fstat(fd).st_size - KILL_TAIL))
        return f.read(KILL_TAIL).decode("utf-8", "replace")


def _junit(gate: Gate, scratch: Path, dest: Path) -> tuple[bytes | None, str | None]:
    """The JUnit bytes the gate wrote (copied to `dest`), or why there are none."""
    if gate.expect.junit is None:
        return None, None
    try:
        fd = open_beneath(scratch, gate.expect.junit)
    except FileNotFoundError:
        return None, "not written"
    except (NotRegular, OSError) as e:
        return None, f"not a readable regular file ({e.strerror or e})"
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_JUNIT + 1)
    if len(data) > MAX_JUNIT:
        return None, f"over the {MAX_JUNIT} byte limit"
    try:  # exclusive: never through a name a gate planted in the record folder
        with open(dest, "xb") as out:
            out.write(data)
    except FileExistsError:
        return None, f"{dest.name} already in the record folder (a gate may not write there)"
    return data, None


def _execute(gate: Gate, cwd: Path, scratch: Path, out_dir: Path) -> GateRun:
    """Run one gate's command; what it did, as a GateRun for the judge."""
    argv = [a.replace(GATE_DIR_TOKEN, str(scratch)) for a in gate.run]
    env = {**{k: v for k, v in os.environ.items() if k not in AGENT_ENV},
           GATE_DIR_ENV: str(scratch)}
    began = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as e:
        for log in ("stdout.log", "stderr.log"):
            (out_dir / log).write_bytes(b"")
        return GateRun(None, 0.0, start_error=f"{argv[0]}: {e.strerror or e}")
    stop = threading.Event()
    copiers = [threading.Thread(target=_copy, args=(pipe, out_dir / name, stop), daemon=True)
               for pipe, name in ((proc.stdout, "stdout.log"), (proc.stderr, "stderr.log"))]
    for t in copiers:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=gate.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:  # also on Ctrl-C: never leave a gate running
        _kill(proc)
        proc.wait()
    for t in copiers:
        t.join(GRACE_S)
    lingering = any(t.is_alive() for t in copiers)  # a process it started holds a pipe
    stop.set()
    junit, problem = _junit(gate, scratch, out_dir / "junit.xml")
    return GateRun(None if timed_out else proc.returncode, round(time.monotonic() - began, 3),
                   timed_out=timed_out, stdout=_tail(out_dir / "stdout.log"),
                   junit=junit, junit_problem=problem, lingering=lingering)


def _cwd(gate: Gate, project_dir: Path) -> Path:
    """The gate's folder: the project, or a folder inside it (InvalidInput otherwise)."""
    real_project = Path(os.path.realpath(project_dir))
    cwd = Path(os.path.realpath(real_project / (gate.cwd or ".")))
    if not (cwd == real_project or real_project in cwd.parents) or not cwd.is_dir():
        raise InvalidInput(f"gate {gate.name}: cwd {gate.cwd!r} is not a folder inside the "
                           f"project {project_dir}")
    return cwd


def _folder(runs_dir: Path, campaign: str) -> Path:
    parent = runs_dir / GATES_DIR
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for n in range(100):
            folder = parent / (f"{campaign}-{stamp()}" + (f"-{n}" if n else ""))
            try:
                folder.mkdir()
                return folder
            except FileExistsError:
                continue
    except OSError as e:
        raise EnvironmentFault(f"{parent}: cannot create the gate record folder: "
                               f"{e.strerror or e}") from None
    raise EnvironmentFault(f"{parent}: no free name for a gate record")


def _untouched(folder: Path, gates: list[Gate], doc: dict[str, Any]) -> None:
    """Refuse (GATES-TAMPERED, SHA256SUMS removed) a record folder holding anything the
    harness did not write, or a rewritten gates.json: a gate's process may find the folder."""
    wanted = {GATE_RECORD, SUMS} | {g.name for g in gates} | {
        f"{g.name}/{f}" for g in gates for f in ("stdout.log", "stderr.log", "junit.xml")}
    try:
        entries = walk(folder, 4 * len(wanted))
        stray = sorted(e.rel for e in entries if e.rel not in wanted or e.name_problem
                       or not (e.is_file or e.is_dir))
        with os.fdopen(open_beneath(folder, GATE_RECORD), "rb") as f:
            same = f.read(len(dumps_json(doc).encode()) + 1) == dumps_json(doc).encode()
    except (OSError, TooMany) as e:
        stray, same = [f"({getattr(e, 'strerror', None) or e})"], False
    if stray or not same:
        with contextlib.suppress(OSError):
            (folder / SUMS).unlink()
        shown = ", ".join(printable(s) for s in stray[:10]) or f"{GATE_RECORD} was rewritten"
        raise Refused(f"{folder}: something other than the harness wrote into the gate record "
                      f"while the gates ran ({shown}); it is left unsealed: run the gates "
                      "again", rule=GATES_TAMPERED)


Echo = Callable[[dict[str, Any]], None]


def run_gates(loaded: Loaded, runs_dir: Path, only: tuple[str, ...] = (),
              echo: Echo = lambda entry: None) -> tuple[Path, dict[str, Any], int]:
    """Run the selected gates in order, seal the record; (folder, gates.json doc, exit)."""
    gates = select(loaded.gates, only)
    if not gates:
        raise InvalidInput(f"{loaded.campaign_file}: the campaign lists no gates")
    cwds = [_cwd(g, loaded.project_dir) for g in gates]  # every cwd checked before any runs
    seal, tree = _checked(loaded)
    folder, started = _folder(runs_dir, loaded.campaign.name), utc_now()
    entries: list[dict[str, Any]] = []
    runs: list[GateRun] = []
    seals: list[tuple[str, SourceSeal]] = []  # the seal after each gate
    trees = [tree]
    with tempfile.TemporaryDirectory(prefix=".gate-", dir=folder.parent) as tmp:
        for gate, cwd in zip(gates, cwds, strict=True):
            scratch, out_dir = Path(tmp) / gate.name, folder / gate.name
            scratch.mkdir()
            out_dir.mkdir()
            try:
                out = _execute(gate, cwd, scratch, out_dir)
            except KeyboardInterrupt:  # the gate is killed (_execute); seal what ran
                out = GateRun(None, 0.0, interrupted=True)
            entries.append(gate_entry(gate, list(gate.run), out, judge(gate, out)))
            runs.append(out)
            echo(entries[-1])
            shutil.rmtree(scratch, ignore_errors=True)
            seal_now, tree_now = _checked(loaded)
            seals.append((gate.name, seal_now))
            trees.append(tree_now)
            if out.interrupted:
                break
    refusals = refusals_of(seal, seals)
    doc = {"schema": SCHEMA, "campaign": {"name": loaded.campaign.name,
                                          "file": str(loaded.campaign_file)},
           "source_seal": seal.digest, "git": joined(trees),
           "times": {"started": started, "ended": utc_now()},
           "gates": entries, "refusals": refusals, "passed": verdict(entries, refusals),
           "harness": tree.harness}
    try:
        write_json(folder / GATE_RECORD, doc, exclusive=True)
        _untouched(folder, gates, doc)
        write_manifest(folder)
        _untouched(folder, gates, doc)  # nothing swapped in while it was hashed
        make_read_only(folder)
    except OSError as e:
        raise EnvironmentFault(f"{folder}: cannot seal the gate record: "
                               f"{e.strerror or e}") from None
    return folder, doc, exit_code(entries, runs, refusals)


def _checked(loaded: Loaded) -> tuple[SourceSeal, CleanCheck]:
    """The source seal and whether the checkout is clean at its commit, over one file list."""
    inputs = loaded.files()
    return (source_seal(loaded.project_dir, inputs),
            clean_at(loaded.project_dir, source_files(loaded.project_dir, inputs)))

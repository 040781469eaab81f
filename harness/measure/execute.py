"""Run one docker vector and measure it: native logs, timeout, exit and OOM, calling back
at each phase around the container where `harness.pipeline.evidence` gathers. It measures,
never judges (BenchExec's split).

Each stream is copied into its native log with bounded memory; `stamps.jsonl` maps byte
offsets to UTC times, so any line can be placed in time without rewriting the native bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import docker.errors

from harness.base.signals import Interrupted, on_second_interrupt
from harness.base.timeutil import utc_now
from harness.measure import engine
from harness.measure.runfolder import layout
from harness.measure.vector import Vector
from harness.measure.witness.subject import DURING, EXITED, LAUNCHED, STARTED, Subject

CIDFILE_WAIT_S = 60.0
BUF = 1 << 16
STAMP_EVERY_S = 1.0


@dataclass
class ContainerExit:
    """How the container ended and what was measured on the way: outcome.json."""

    exit_code: int | None = None
    oom_killed: bool = False
    timed_out: bool = False
    interrupted: bool = False
    signal: str | None = None  # the stop signal that interrupted it
    launcher_exit: int | None = None
    container_id: str | None = None
    started: str | None = None
    ended: str | None = None
    duration_s: float | None = None
    container_started_at: str | None = None
    container_finished_at: str | None = None
    log_bytes: dict[str, int] = field(default_factory=dict)
    log_errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"schema": "harness.outcome/v1", **asdict(self)}


class Pump(threading.Thread):
    """Drain `fd` into `path`; (offset, time) stamps go to `stamps_path`, which both streams
    share under `lock`."""

    def __init__(self, name: str, fd: int, path: str, stamps_path: str, lock: threading.Lock):
        super().__init__(name=f"pump-{name}", daemon=True)
        self.stream = name
        self.fd = fd
        self.path = path
        self.stamps_path = stamps_path
        self.stamps_lock = lock
        self.bytes = 0
        self.error: str | None = None

    def _stamp(self, out, offset: int) -> None:
        line = json.dumps({"stream": self.stream, "offset": offset, "at": utc_now()})
        with self.stamps_lock:
            out.write(line + "\n")
            out.flush()

    def run(self) -> None:
        buf = bytearray(BUF)
        last = 0.0
        try:
            with open(self.path, "wb", buffering=0) as log, \
                 open(self.stamps_path, "a", buffering=1) as stamps:
                while True:
                    n = os.readv(self.fd, [buf])
                    if n == 0:
                        break
                    now = time.monotonic()
                    if now - last >= STAMP_EVERY_S:
                        self._stamp(stamps, self.bytes)
                        last = now
                    view = memoryview(buf)[:n]
                    while view:
                        w = log.write(view)
                        view = view[w:]
                    self.bytes += n
                self._stamp(stamps, self.bytes)
                os.fsync(log.fileno())
        except OSError as e:  # disk full: keep draining so the container is not blocked
            self.error = f"{type(e).__name__}: {e}"
            while os.read(self.fd, BUF):
                pass
        finally:
            os.close(self.fd)


def _program(name: str, env: dict[str, str]) -> str | None:
    """The path `Popen`'s PATH search finds for argv[0], as the launcher witness sees it."""
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    return os.path.abspath(found) if found else None


def _wait_cid(cidfile: Path, proc: subprocess.Popen, limit: float) -> str | None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        exited = proc.poll() is not None
        with contextlib.suppress(OSError):
            if cid := cidfile.read_text().strip():
                return cid
        if exited:
            return None
        time.sleep(0.01)
    return None


def stop_container(cid: str, grace: float) -> str:
    """SIGTERM, then SIGKILL after `grace` seconds (docker stop), then make sure."""
    api = engine.client().api
    try:
        api.stop(cid, timeout=int(max(1, grace)))
    except docker.errors.NotFound:
        return "gone"
    except docker.errors.APIError:
        pass
    try:
        if api.inspect_container(cid)["State"]["Running"]:
            api.kill(cid)
            return "killed"
    except docker.errors.NotFound:
        return "gone"
    return "stopped"


def _kill_quietly(cid: str) -> None:
    with contextlib.suppress(Exception):  # gone, or the engine busy: the stop goes on anyway
        engine.client().api.kill(cid)


def stop_interrupted(cid: str | None, grace: float) -> str:
    """Stop the container of an interrupted run; a second Ctrl-C meanwhile kills it at
    once (from a thread: the handler must not block) instead of waiting out `grace`."""
    if not cid:
        return "no container"
    hurried: list[bool] = []

    def kill_now() -> None:
        hurried.append(True)
        threading.Thread(target=_kill_quietly, args=(cid,), daemon=True).start()

    with on_second_interrupt(kill_now):
        how = stop_container(cid, grace)
    return how + (" (killed at once: a second interrupt)" if hurried else "")


def _wait_exit(proc: subprocess.Popen, cid: str | None, out: ContainerExit, *, deadline: float,
               timeout: float, grace: float) -> None:
    """Wait for the launcher to exit, waking on its pidfd (a 50 ms poll was visible in a
    short control's time); past the deadline stop the container."""
    pidfd = _pidfd(proc.pid)
    try:
        while proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                out.timed_out = True
                out.notes.append(f"timeout after {timeout:g}s: "
                                 f"{stop_container(cid, grace) if cid else 'no container'}")
                return
            if pidfd is None:
                time.sleep(min(left, 0.05))
            else:  # a signal still interrupts this wait (the handler raises Interrupted)
                select.select([pidfd], [], [], min(left, 1.0))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _pidfd(pid: int) -> int | None:
    """A descriptor readable when `pid` exits; None before Linux 5.3 (the wait polls)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _pumps(proc: subprocess.Popen, logs: Path) -> list[Pump]:
    """The launcher's two streams copied into logs/ (one stamps file for both), started."""
    stamp_lock = threading.Lock()
    pumps = [Pump(name, os.dup(stream.fileno()), str(logs / f"{name}.log"),
                  str(logs / layout.STAMPS), stamp_lock)
             for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    proc.stdout.close()
    proc.stderr.close()
    for p in pumps:
        p.start()
    return pumps


def run(vector: Vector, run_dir: Path, *, timeout: float, grace: float,
        on_started: Callable[[str], None] | None = None,
        on_interrupt: Callable[[str, str | None], None] | None = None,
        at: Callable[[str, Subject], None] = lambda _phase, _subject: None) -> ContainerExit:
    """Launch, stream to logs/, wait; `at(phase, subject)` at each phase. On a stop signal
    `on_interrupt` is told before the container is stopped, so a person learns at once."""
    out = ContainerExit()
    logs = run_dir / layout.LOGS
    logs.mkdir(exist_ok=True)
    cidfile = Path(vector.argv[vector.argv.index("--cidfile") + 1])
    env = {**os.environ, **vector.passed_env}
    out.started = utc_now()
    t0 = time.monotonic()
    proc = subprocess.Popen(vector.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    # Witness first, before anything else can happen to the launcher.
    subject = Subject(proc.pid, secret_names=frozenset(vector.passed_env),
                      program=_program(vector.argv[0], env), argv=tuple(vector.argv))
    at(LAUNCHED, subject)
    pumps = _pumps(proc, logs)
    cid = None
    try:
        cid = _wait_cid(cidfile, proc, CIDFILE_WAIT_S)
        out.container_id = cid
        if cid:
            subject = replace(subject, container_id=cid)
            at(STARTED, subject)
            at(DURING, subject)
            if on_started:
                on_started(cid)
        else:
            out.notes.append("no container id: docker run failed before creating it")
        _wait_exit(proc, cid, out, deadline=t0 + timeout, timeout=timeout, grace=grace)
    except Interrupted as e:
        # `cid` read again if docker had not named it: one created meanwhile is never left
        # running beside a released lock
        cid = cid or _wait_cid(cidfile, proc, CIDFILE_WAIT_S)
        out.interrupted, out.signal, out.container_id = True, str(e), cid
        if on_interrupt:
            on_interrupt(str(e), cid)
        out.notes.append(f"interrupted: {stop_interrupted(cid, grace)}")
    finally:
        try:
            out.launcher_exit = proc.wait(timeout=grace + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out.launcher_exit = proc.wait()
            out.notes.append("the docker CLI did not exit after the container stopped; killed")
        at(EXITED, subject)
        for p in pumps:
            p.join(timeout=60)
        out.ended = utc_now()
        out.duration_s = round(time.monotonic() - t0, 3)
        out.log_bytes = {p.stream: p.bytes for p in pumps}
        out.log_errors = {p.stream: p.error for p in pumps if p.error}
        if cid:
            _final_state(cid, out)
    return out


def _final_state(cid: str, out: ContainerExit) -> None:
    api = engine.client().api
    try:
        state = api.inspect_container(cid)["State"]
    except docker.errors.NotFound:
        out.notes.append("container vanished before its exit state was read")
        return
    out.exit_code = state.get("ExitCode")
    out.oom_killed = bool(state.get("OOMKilled"))
    out.container_started_at = state.get("StartedAt")
    out.container_finished_at = state.get("FinishedAt")
    if state.get("Running"):
        out.notes.append("container still running after the launcher exited")
        return
    try:
        api.remove_container(cid)
    except docker.errors.APIError as e:
        out.notes.append(f"could not remove the container: {e}")

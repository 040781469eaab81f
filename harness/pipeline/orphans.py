"""Containers left by a harness that died (SIGKILL): remove the exited, refuse the running.

Each container carries labels naming the harness process that launched it (pid, start
time, host). Under the GPU lock, a container of this lock that is no longer running and
whose launcher is gone belongs to nobody: nothing will read its exit state or remove it, so
it is removed here, and the run that did it records what it removed. A running one still
refuses the launch (ENV-ORPHAN-CONTAINER): stopping a workload is the operator's call.
A container whose launcher is alive, or unknown, or on another host, is never touched.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import docker.errors
import psutil

from harness.base import bounds
from harness.base.bounds import BadText
from harness.measure import engine, vector
from harness.measure.lock import pid_alive

LABEL_PID = vector.LAUNCHER_PID
LABEL_STARTED = vector.LAUNCHER_STARTED
LABEL_HOST = vector.LAUNCHER_HOST
RUNNING_STATES = frozenset({"running", "paused", "restarting"})


def launcher_identity() -> dict[str, str]:
    """This process, as `vector.VectorInput.launcher` wants it (label suffix -> value)."""
    me = psutil.Process()
    return {"pid": str(me.pid), "started": f"{me.create_time():.6f}",
            "host": socket.gethostname()}


def launcher_alive(pid: int, started: float) -> bool:
    """Is `pid` still the process that started at `started` (not a reuse of its pid)?"""
    return pid_alive(pid, started)


def reapable(container: dict, host: str, alive: Callable[[int, float], bool]) -> bool:
    """Pure: may this listed container (docker's `containers` entry) be removed?

    Only when it is not running and its labels name a launcher on this host that is gone."""
    if container.get("State") in RUNNING_STATES:
        return False
    lab = container.get("Labels") or {}
    if lab.get(LABEL_HOST) != host:
        return False
    try:  # labels are anyone's who can reach the engine: bounded, ASCII, finite
        pid = bounds.parse_int(lab[LABEL_PID], "a launcher pid", max_digits=10)
        started = bounds.parse_decimal(lab[LABEL_STARTED], "a launcher start time")
    except (KeyError, BadText):
        return False
    return not alive(pid, started)


def _filters(lock_path: object, device: str) -> list[dict]:
    out = [{"label": f"{vector.LABEL_PREFIX}.lock={lock_path}"}]
    if device == "rocm":  # any rocm container holds the GPU, whatever its lock
        out.append({"label": f"{vector.LABEL_PREFIX}.device=rocm"})
    return out


def _listed(lock_path: object, device: str, *, only_running: bool) -> dict[str, dict]:
    api = engine.client().api
    found: dict[str, dict] = {}
    status = {"status": "running"} if only_running else {}
    for f in _filters(lock_path, device):
        for c in api.containers(all=not only_running, filters={**f, **status}):
            found[c["Id"]] = c
    return found


def _run_id(c: dict) -> str | None:
    return (c.get("Labels") or {}).get(f"{vector.LABEL_PREFIX}.run-id")


def running(lock_path: object, device: str) -> list[dict]:
    """Running containers a harness launched under this lock (or any rocm one for rocm)."""
    found = _listed(lock_path, device, only_running=True)
    return [{"id": cid, "names": c.get("Names"), "run_id": _run_id(c)}
            for cid, c in found.items()]


def reap(lock_path: object, device: str) -> list[dict]:
    """Remove the exited containers of dead launchers; return one record per container
    (removed, or why it could not be)."""
    api = engine.client().api
    host = socket.gethostname()
    out = []
    for cid, c in _listed(lock_path, device, only_running=False).items():
        if not reapable(c, host, launcher_alive):
            continue
        rec = {"id": cid, "run_id": _run_id(c), "names": c.get("Names"),
               "launcher_pid": (c.get("Labels") or {}).get(LABEL_PID)}
        try:
            state = api.inspect_container(cid).get("State") or {}
            rec.update(state=state.get("Status"), exit_code=state.get("ExitCode"),
                       finished_at=state.get("FinishedAt"))
            if state.get("Status") in RUNNING_STATES:  # started since it was listed
                continue
            api.remove_container(cid)  # never forced: a running container is not removed
            rec["removed"] = True
        except docker.errors.NotFound:
            rec.update(removed=False, error="gone before it could be removed")
        except docker.errors.APIError as e:
            rec.update(removed=False, error=str(e))
        out.append(rec)
    return out


def running_run_ids() -> Callable[[str], bool]:
    """A test for "does a container of this run id still run?", over every harness
    container the engine runs now. When the engine cannot say, every run counts as
    running: a folder is never sealed while its workload might still write into it."""
    try:
        api = engine.client().api
        found = api.containers(filters={"label": f"{vector.LABEL_PREFIX}.run-id",
                                        "status": "running"})
    except Exception:  # the SDK raises many kinds: all mean the engine did not answer
        return lambda _run_id: True
    ids = {_run_id(c) for c in found}
    return lambda run_id: run_id in ids

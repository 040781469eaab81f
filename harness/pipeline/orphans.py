"""Containers left by a harness that died (SIGKILL), found by the labels naming their
launcher (pid, start time, host). An exited one whose launcher is gone belongs to nobody,
so it is removed under the lock; a running one is never stopped (the operator's call), and
one whose launcher is alive, unknown or on another host is never touched."""

from __future__ import annotations

import socket
from collections.abc import Callable

import docker.errors
import psutil

from harness.measure import engine, vector
from harness.measure.lock import pid_alive

RUNNING_STATES = frozenset({"running", "paused", "restarting"})


def launcher_identity() -> dict[str, str]:
    """This process, as `vector.VectorInput.launcher` wants it (label suffix -> value)."""
    me = psutil.Process()
    return {"pid": str(me.pid), "started": f"{me.create_time():.6f}",
            "host": socket.gethostname()}


launcher_alive = pid_alive  # the process that started then, not a reuse of its pid


def reapable(container: dict, host: str, alive: Callable[[int, float], bool]) -> bool:
    """Pure: may this listed container be removed? Only when it is not running and its
    labels name a launcher on this host that is gone."""
    if container.get("State") in RUNNING_STATES:
        return False
    # labels are anyone's who can reach the engine: `launcher_of` reads them bounded
    launcher = vector.launcher_of(container.get("Labels") or {})
    return launcher is not None and launcher[2] == host and not alive(*launcher[:2])


def _filters(lock_path: object, device: str) -> list[dict]:
    out = [{"label": f"{vector.LABEL_PREFIX}.lock={lock_path}"}]
    if device == "rocm":  # any rocm container holds the GPU, whatever its lock
        out.append({"label": f"{vector.LABEL_PREFIX}.device=rocm"})
    return out


def _listed(lock_path: object, device: str) -> dict[str, dict]:
    api = engine.client().api
    return {c["Id"]: c for f in _filters(lock_path, device)
            for c in api.containers(all=True, filters=f)}


def _run_id(c: dict) -> str | None:
    return (c.get("Labels") or {}).get(f"{vector.LABEL_PREFIX}.run-id")


def reap(lock_path: object, device: str) -> list[dict]:
    """Remove the exited containers of dead launchers; one record for each."""
    api = engine.client().api
    host = socket.gethostname()
    out = []
    for cid, c in _listed(lock_path, device).items():
        if not reapable(c, host, launcher_alive):
            continue
        rec = {"id": cid, "run_id": _run_id(c), "names": c.get("Names"),
               "launcher_pid": (c.get("Labels") or {}).get(vector.LAUNCHER_PID)}
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
    """A test for "does a container of this run id still run?". When the engine cannot say,
    every run counts as running: a folder is never sealed while it might still be written."""
    try:
        api = engine.client().api
        found = api.containers(filters={"label": f"{vector.LABEL_PREFIX}.run-id",
                                        "status": "running"})
    except Exception:  # the SDK raises many kinds: all mean the engine did not answer
        return lambda _run_id: True
    ids = {_run_id(c) for c in found}
    return lambda run_id: run_id in ids

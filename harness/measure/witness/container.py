"""Witness of the container: `docker inspect` through the SDK, its init PID and cgroup."""

from __future__ import annotations

import time

import docker.errors

from harness.base.readfile import InputError, read_text_bounded
from harness.measure import engine
from harness.measure.vector import looks_secret, redact

MAX_CGROUP = 64 * 1024  # one line per hierarchy: a few hundred bytes


def cgroup_of(pid: int) -> list[str] | None:
    """The cgroup lines of `pid` (a few short lines), or None when they cannot be read."""
    try:
        return read_text_bounded(f"/proc/{pid}/cgroup", MAX_CGROUP, "cgroup file").splitlines()
    except InputError:
        return None


def redact_env(inspect: dict, names: set[str]) -> dict:
    """Docker shows every env value in Config.Env: secrets become sha256 markers there."""
    config = inspect.get("Config") or {}
    env = config.get("Env") or []
    out = []
    for entry in env:
        name, sep, value = entry.partition("=")
        out.append(f"{name}={redact(value)}" if sep and (name in names or looks_secret(name))
                   else entry)
    if env:
        inspect = {**inspect, "Config": {**config, "Env": out}}
    return inspect


def _inspect_started(container_id: str, wait_s: float) -> dict:
    """Inspect once the container has left the `created` state (docker writes the cidfile
    at create, before start; the init PID exists only once it runs)."""
    api = engine.client().api
    deadline = time.monotonic() + wait_s
    while True:
        inspect = api.inspect_container(container_id)
        if (inspect.get("State") or {}).get("Status") != "created" \
                or time.monotonic() >= deadline:
            return inspect
        time.sleep(0.01)


def collect(container_id: str, secret_names: set[str] = frozenset(),
            wait_s: float = 30.0) -> dict:
    try:
        inspect = _inspect_started(container_id, wait_s)
    except docker.errors.NotFound:
        return {"schema": "harness.measure.witness.container/v1", "id": container_id,
                "error": "the container was gone before it could be inspected"}
    state = inspect.get("State") or {}
    pid = state.get("Pid") or None
    note = None if pid else ("the container had already exited when it was inspected, so its "
                             "init PID and cgroup can no longer be observed")
    return {"schema": "harness.measure.witness.container/v1", "id": container_id, "init_pid": pid,
            "note": note,
            "cgroup": cgroup_of(pid) if pid else None,
            "inspect": redact_env(inspect, set(secret_names))}


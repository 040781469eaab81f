"""`harness status`: who holds the GPU lock, which harness containers run, how the night goes.

Everything here only reads: the holder records beside the locks, the engine's container
list (by the `org.harness.run-id` label) and the latest night's journal, read-only.

A running harness container whose launcher (the pid, start time and host its labels name)
is gone is using the GPU with nobody holding the lock for it: the kernel freed the flock
when that harness died, so the lock alone would read "free". Such a container is flagged
"GPU in use without the lock" (`orphaned`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.base.errors import HarnessError
from harness.driver.night.folders import latest_night
from harness.driver.night.journal import JOURNAL_NAME, Journal, RetryPolicy
from harness.driver.night.nightlock import describe, read_night_holder
from harness.driver.night.rules import progress
from harness.measure import vector
from harness.measure.lock import (
    FIELD_MAX,
    clean_text,
    describe_holder,
    is_free,
    pid_alive,
    read_holder,
)
from harness.readers.report.inert import inert


def lock_state(lock_path: Path) -> dict:
    """Is the lock held, and what do the holder records say. Never raises on a hostile
    lock folder: a lock file that cannot be probed is reported in `problem`."""
    held, problem = False, None
    try:
        held = not is_free(lock_path)
    except OSError as e:
        problem = clean_text(f"cannot probe it: {e.strerror or e}", 2 * FIELD_MAX)
    return {"path": str(lock_path), "exists": os.path.lexists(lock_path), "held": held,
            "problem": problem, "holder": read_holder(lock_path),
            "night_holder": read_night_holder(lock_path)}


# One JSON object per container, built by docker's own template (`json` quotes each value,
# so a label holding a quote, a comma or a control character stays one value).
LABELS = {"run_id": "run-id", "campaign": "campaign", "control": "control", "lock": "lock",
          "device": "device"}
LAUNCHER = {vector.LAUNCHER_PID: "launcher_pid", vector.LAUNCHER_STARTED: "launcher_started",
            vector.LAUNCHER_HOST: "launcher_host"}
PS_FORMAT = "{" + ",".join(
    ['"id":{{json .ID}}', '"names":{{json .Names}}', '"status":{{json .Status}}']
    + [f'"{key}":{{{{json (.Label "{vector.LABEL_PREFIX}.{label}")}}}}'
       for key, label in LABELS.items()]
    + [f'"{key}":{{{{json (.Label "{label}")}}}}' for label, key in LAUNCHER.items()]) + "}"
PS_TIMEOUT_S = 20.0
_RUN_LABEL = f"label={vector.LABEL_PREFIX}.run-id"


def containers() -> tuple[list[dict], str | None]:
    """Harness containers the engine runs now, or ([], why the engine could not say).

    Asked through the docker CLI, which launches every run anyway: one short process, where
    the SDK's import alone took longer than the rest of `harness status`. The CLI follows
    DOCKER_HOST as the SDK does (and a docker context too)."""
    argv = ["docker", "ps", "--no-trunc", "--filter", _RUN_LABEL, "--format", PS_FORMAT]
    try:
        r = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=PS_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        return [], f"docker ps: {type(e).__name__}: {e}"[:200]
    if r.returncode != 0:
        why = r.stderr.decode("utf-8", "replace").strip().splitlines()
        return [], (why[0] if why else f"docker ps exited {r.returncode}")[:200]
    return [_container(line) for line in r.stdout.decode("utf-8", "replace").splitlines()
            if line.strip()], None


def _container(line: str) -> dict:
    """One line of PS_FORMAT as the row status shows: a missing label is None."""
    try:
        doc = json.loads(line)
    except ValueError:  # not docker's template output (another `docker` on PATH)
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    names = str(doc.get("names") or "?")
    launcher = vector.launcher_of({label: doc.get(key) for label, key in LAUNCHER.items()})
    return {"id": str(doc.get("id") or "?"), "name": names.split(",")[0],
            "status": doc.get("status"),
            **{key: (doc.get(key) or None) for key in LABELS},
            "launcher": None if launcher is None else dict(zip(("pid", "started", "host"),
                                                               launcher, strict=True))}


def orphaned(container: dict, host: str,
             alive: Callable[[int, float], bool] = pid_alive) -> bool:
    """Is this running container's launcher, on this host, gone? A launcher on another
    host, or labels that name none, cannot be judged from here: not flagged."""
    who = container.get("launcher")
    if not who or who["host"] != host:
        return False
    return not alive(who["pid"], who["started"])


def on_lock(container: dict, lock_path: Path) -> bool:
    """Does this container use the GPU `lock_path` guards (any rocm container does)?"""
    return container.get("lock") == os.path.abspath(lock_path) or \
        container.get("device") == "rocm"


def night_state(night_dir: Path, night_holder: dict | None) -> dict:
    state: dict = {"dir": str(night_dir), "active": bool(
        night_holder and night_holder.get("alive")
        and night_holder.get("night_dir") == str(night_dir))}
    try:
        with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
            night, rows = j.night(), j.rows()
    except HarnessError as e:
        state["error"] = e.message
        return state
    state.update(campaign=night.campaign, created=night.created, deadline=night.deadline,
                 ended=(night_dir / "ended.json").exists(),
                 progress=progress(rows, RetryPolicy()),
                 running=[r.as_dict() for r in rows if r.state == "running"],
                 rows=[{"control": r.control, "attempt": r.attempt, "state": r.state,
                        "run_id": r.run_id, "origin": r.origin} for r in rows])
    return state


def current_night(runs_dir: Path, night_holder: dict | None) -> Path | None:
    """The night to show: the one the night lock's live holder names (it may run from
    another runs folder than the default `gpu-runs`), else the newest under RUNS_DIR."""
    named = (night_holder or {}).get("night_dir")
    if (night_holder or {}).get("alive") and isinstance(named, str) and os.path.isabs(named):
        path = Path(named)
        if path.is_dir() and not path.is_symlink():
            return path
    return latest_night(runs_dir / "nights")


def gather(runs_dir: Path, lock_path: Path) -> dict:
    lock = lock_state(lock_path)
    found, engine_error = containers()
    host = socket.gethostname()
    for c in found:
        c["orphaned"] = orphaned(c, host)
        c["on_lock"] = on_lock(c, lock_path)
    night_dir = current_night(runs_dir, lock["night_holder"])
    return {"lock": lock, "containers": found, "engine_error": engine_error,
            "night": night_state(night_dir, lock["night_holder"]) if night_dir else None}


def without_lock(c: dict) -> str:
    """Why a flagged container runs unguarded, and what the next run will do about it."""
    who = c["launcher"]
    return (f"its launcher, pid {who['pid']} on {inert(who['host'])}, is gone; the next run on "
            "its lock refuses to launch beside it (ENV-ORPHAN-CONTAINER) until it exits or "
            f"is stopped (docker stop {inert(c['id'][:12])})")


def render(status: dict) -> list[str]:
    """Plain lines for a person."""
    lock = status["lock"]
    if lock.get("problem"):
        state = f"unusable ({lock['problem']})"
    else:
        state = "free" if not lock["held"] else f"held by {describe_holder(lock['holder'])}"
    if any(c.get("orphaned") and c.get("on_lock") for c in status["containers"]):
        state += ", but the GPU is in use without the lock (a container below)"
    out = [f"GPU lock {inert(lock['path'])}: {state}"]
    if not lock["held"] and lock["holder"] and not lock["holder"].get("alive"):
        out.append(f"  (stale holder record: {describe_holder(lock['holder'])})")
    nh = lock["night_holder"]
    out.append("night lock: " + (describe(nh) if nh and nh.get("alive") else "free"))
    if status["engine_error"]:
        out.append(f"containers: engine unreachable ({inert(status['engine_error'])})")
    elif not status["containers"]:
        out.append("containers: no harness container running")
    for c in status["containers"]:
        out.append(f"container {inert(c['id'])} {inert(c['name'])}: run {inert(c['run_id'])} "
                   f"({inert(c['campaign'])}/{inert(c['control'])}), {inert(c['status'])}")
        if c.get("orphaned"):
            out.append(f"  GPU in use without the lock: {without_lock(c)}")
    night = status["night"]
    if night is None:
        named = nh.get("night_dir") if nh and nh.get("alive") else None
        out.append(f"night: {inert(named)} (named by the night lock; its folder cannot be read "
                   "from here)" if named else "night: none yet")
        return out
    # Everything below comes from the night folder's name and its journal, which anyone who
    # can write the runs folder controls: each value is shown inert (no ESC, OSC-8, newline).
    if "error" in night:
        out.append(f"night {inert(night['dir'])}: {inert(night['error'])}")
        return out
    p = night["progress"]
    where = "running now" if night["active"] else ("ended" if night["ended"] else "stopped")
    states = ", ".join(f"{inert(k)} {inert(v)}" for k, v in p["states"].items())
    out.append(f"night {inert(night['dir'])} ({inert(night['campaign'])}, {where}): "
               f"{inert(p['done'])}/{inert(p['total'])} done; {states}")
    for r in night["rows"]:
        out.append(f"  {inert(r['control'])} #{inert(r['attempt'])} {inert(r['state'])}"
                   + (f" {inert(r['run_id'])}" if r["run_id"] else "")
                   + (f" ({inert(r['origin'])})" if r["origin"] != "plan" else ""))
    return out

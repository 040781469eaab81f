"""`harness status`: who holds the GPU lock, which harness containers run, how the night goes,
when the next one is scheduled.

Only reads. A running harness container whose launcher is gone uses the GPU with nobody
holding the lock (the kernel freed the flock when that harness died, so the lock alone
reads "free"): it is flagged "GPU in use without the lock" (`orphaned`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

from harness.base.errors import HarnessError
from harness.base.readfile import InputError, read_bounded
from harness.base.states import State
from harness.measure import vector
from harness.measure.lock import (
    FIELD_MAX,
    clean_text,
    describe_holder,
    is_free,
    pid_alive,
    read_holder,
)
from harness.measure.nightfolder.holder import describe, night_running, read_night_holder
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import (
    ENDED,
    JOURNAL_NAME,
    NIGHTS,
    latest_night,
    night_names,
    night_parts,
)
from harness.measure.nightfolder.progress import progress
from harness.measure.runfolder.refs import newest_first
from harness.readers.report.ending import summary_doc
from harness.readers.report.inert import inert


def lock_state(lock_path: Path) -> dict:
    """Is the lock held, and what do the holder records say. Never raises on a hostile lock
    folder: a lock file that cannot be probed is reported in `problem`."""
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
    """Harness containers the engine runs now, or ([], why the engine could not say). The
    docker CLI, not the SDK, whose import alone took longer than the rest of `harness status`."""
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


def orphaned(container: dict, host: str) -> bool:
    """Is this running container's launcher, on this host, gone? A launcher on another
    host, or labels that name none, cannot be judged from here: not flagged."""
    who = container.get("launcher")
    if not who or who["host"] != host:
        return False
    return not pid_alive(who["pid"], who["started"])


def on_lock(container: dict, lock_path: Path) -> bool:
    """Does this container use the GPU `lock_path` guards (any rocm container does)?"""
    return container.get("lock") == os.path.abspath(lock_path) or \
        container.get("device") == "rocm"


def ended_of(night_dir: Path) -> dict | None:
    """{"at", "why"} from the night's ended.json (bounded; None when it did not end on
    purpose, or the file is unreadable: then `ended` is still true, with no time)."""
    try:
        doc = json.loads(read_bounded(night_dir / ENDED, 64 * 1024, what=ENDED))
    except (InputError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    return {"at": inert(doc.get("at"), 64) if doc.get("at") else None,
            "why": inert(doc.get("why"), 64) if doc.get("why") else None}


def headline_of(night_dir: Path) -> str | None:
    """The night's headline as its summary.json says it (controls, then regressions); None
    before the summary is written, or when it is unreadable."""
    line = (summary_doc(night_dir) or {}).get("headline")
    return inert(line, 400) if isinstance(line, str) else None


def night_state(night_dir: Path, night_holder: dict | None) -> dict:
    state: dict = {"dir": str(night_dir), "active": False}
    try:
        with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
            night, rows = j.night(), j.rows()
    except HarnessError as e:
        state.update(active=night_running(night_dir, night_holder, socket.gethostname(), []),
                     error=e.message)
        return state
    state.update(active=night_running(night_dir, night_holder, socket.gethostname(), rows),
                 campaign=night.campaign, created=night.created, deadline=night.deadline,
                 ended=os.path.lexists(night_dir / ENDED), end=ended_of(night_dir),
                 last_change=max((r.updated for r in rows), default=None),
                 progress=progress(rows), headline=headline_of(night_dir),
                 running=[r.as_dict() for r in rows if r.state == State.RUNNING],
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
    try:
        return latest_night(runs_dir / NIGHTS)
    except OSError:  # an unreadable nights folder: no night to show, as when there is none
        return None


MAX_CAMPAIGNS = 50  # campaigns listed; a runs dir with more says how many it left out


def latest_per_campaign(nights_dir: Path) -> list[Path]:
    """The newest night folder of each campaign under `nights_dir` (the folders `ls
    --nights` lists: real ones, named in the safe alphabet), by campaign name."""
    try:
        found = night_names(nights_dir)
    except OSError:
        return []
    newest: dict[str, Path] = {}
    for name in newest_first(found, night_parts):
        newest.setdefault(name.rsplit("-", 1)[0], nights_dir / name)  # <campaign>-<stamp>
    return [newest[c] for c in sorted(newest)]


# The next scheduled night: the systemd user timers `harness schedule --install` wrote.
# systemctl is asked once, bounded in time and output; no answer (no user bus in a container,
# no systemd, a hung manager) is a `timers: unknown (why)` line, never a failed status: no
# timer line would read as "none scheduled". Only `harness-night-<campaign>.timer` units are
# reported, as inert text.
TIMERS_TIMEOUT_S = 5.0
MAX_TIMERS_OUTPUT = 256 * 1024
TIMER_PREFIX = "harness-night-"
_UNIT = re.compile(r"\b(" + re.escape(TIMER_PREFIX) + r"[A-Za-z0-9:_.\\-]+)\.timer\b")
# NEXT and LEFT, the first two columns: `Thu 2026-12-03 02:15:00 UTC 15h left`, or `n/a n/a`
_NEXT = re.compile(r"^\s*(?P<next>\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: \S+)?)\s+"
                   r"(?P<left>.+? left)\s")


def parse_timers(text: str) -> list[dict]:
    """[{"unit", "next", "left"}] for each harness night timer in `systemctl --user list-timers
    --all --no-legend` output; next/left None when it has no next trigger (an inactive timer).
    Pure; lines it does not understand are skipped."""
    out = []
    for line in text.splitlines():
        unit = _UNIT.search(line)
        if unit is None:
            continue
        m = _NEXT.match(line)
        out.append({"unit": inert(unit.group(1) + ".timer", 200),
                    "next": inert(m.group("next"), 80) if m else None,
                    "left": inert(m.group("left"), 40) if m else None})
    return out


def list_timers() -> tuple[list[dict], str | None]:
    """The harness night timers and their next trigger, or ([], why not asked/answered)."""
    exe = shutil.which("systemctl")
    if exe is None:
        return [], "no systemctl on this host"
    argv = [exe, "--user", "list-timers", "--all", "--no-legend", "--no-pager"]
    env = {**os.environ, "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0", "LC_ALL": "C"}
    try:
        r = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=TIMERS_TIMEOUT_S, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return [], inert(f"systemctl: {type(e).__name__}", 200)
    if r.returncode != 0:
        why = r.stderr[:MAX_TIMERS_OUTPUT].decode("utf-8", "replace").strip().splitlines()
        return [], inert("systemd user bus unreachable: "
                         f"{why[0] if why else f'systemctl --user exit {r.returncode}'}", 200)
    return parse_timers(r.stdout[:MAX_TIMERS_OUTPUT].decode("utf-8", "replace")), None


def gather(runs_dir: Path, lock_path: Path, *, timers: bool = True) -> dict:
    lock = lock_state(lock_path)
    found, engine_error = containers()
    host = socket.gethostname()
    for c in found:
        c["orphaned"] = orphaned(c, host)
        c["on_lock"] = on_lock(c, lock_path)
    night_dir = current_night(runs_dir, lock["night_holder"])
    current = night_state(night_dir, lock["night_holder"]) if night_dir else None
    latest = latest_per_campaign(runs_dir / NIGHTS)
    nights = [current if current and os.path.realpath(p) == os.path.realpath(night_dir)
              else night_state(p, lock["night_holder"]) for p in latest[:MAX_CAMPAIGNS]]
    if current and current not in nights:  # a live night of another runs dir
        nights.insert(0, current)
    scheduled, why = list_timers() if timers else ([], "not asked")
    return {"lock": lock, "containers": found, "engine_error": engine_error,
            "night": current, "nights": nights, "campaigns_left_out":
            max(len(latest) - MAX_CAMPAIGNS, 0), "timers": scheduled, "timers_error": why}


def without_lock(c: dict) -> str:
    """Why a flagged container runs unguarded, and what the next run will do about it."""
    who = c["launcher"]
    return (f"its launcher, pid {who['pid']} on {inert(who['host'])}, is gone; the next run on "
            "its lock refuses to launch beside it (ENV-ORPHAN-CONTAINER) until it exits or "
            f"is stopped (docker stop {inert(c['id'][:12])})")


def progress_text(p: dict) -> str:
    """`2/3 done; accepted 2, interrupted 1`: the night's own line says the same words."""
    states = ", ".join(f"{inert(k)} {inert(v)}" for k, v in p["states"].items())
    return f"{inert(p['done'])}/{inert(p['total'])} done" + (f"; {states}" if states else "")


def where_text(night: dict) -> str:
    """`running now`, `ended 2026-12-02T10:35:37Z (done)`, or `stopped, last change …`."""
    if night["active"]:
        return "running now"
    if night["ended"]:
        end = night.get("end") or {}
        at = f" {end['at']}" if end.get("at") else ""
        return f"ended{at}" + (f" ({end['why']})" if end.get("why") else "")
    last = night.get("last_change")
    return "stopped" + (f", last change {inert(last, 64)}" if last else "")


def campaign_lines(nights: list[dict], current: dict | None, left_out: int) -> list[str]:
    """One line per campaign: its latest night, when it ended, its progress."""
    others = [n for n in nights if current is None or n["dir"] != current["dir"]]
    if not others:
        return []
    out = ["latest night per campaign:"]
    for n in nights:
        if "error" in n:
            out.append(f"  {inert(n['dir'])}: {inert(n['error'])}")
            continue
        out.append(f"  {inert(n['campaign'])}: {inert(os.path.basename(n['dir']))}, "
                   f"{where_text(n)}: {progress_text(n['progress'])}")
    if left_out:
        out.append(f"  … and {left_out} more campaigns")
    return out


def timer_lines(timers: list[dict], why: str | None = None) -> list[str]:
    """`next night: harness-night-x.timer at Thu 2026-12-03 02:15:00 UTC (15h left)`, or
    `timers: unknown (why)` when systemd could not be asked."""
    if why is not None and why != "not asked":
        return [f"timers: unknown ({inert(why, 300)})"]
    return [f"next night: {t['unit']} at {t['next']} ({t['left']})" if t["next"]
            else f"next night: {t['unit']} has no next trigger (inactive)" for t in timers]


def render(status: dict) -> list[str]:
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
    out += timer_lines(status.get("timers") or [], status.get("timers_error"))
    out += campaign_lines(status.get("nights") or [], status.get("night"),
                          status.get("campaigns_left_out") or 0)
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
    out.append(f"night {inert(night['dir'])} ({inert(night['campaign'])}, {where_text(night)}): "
               f"{progress_text(night['progress'])}")
    if night.get("headline") and not night["active"]:  # a running night's is of a walk before
        out.append(f"  summary: {night['headline']}")
    for r in night["rows"]:
        out.append(f"  {inert(r['control'])} #{inert(r['attempt'])} {inert(r['state'])}"
                   + (f" {inert(r['run_id'])}" if r["run_id"] else "")
                   + (f" ({inert(r['origin'])})" if r["origin"] != "plan" else ""))
    return out

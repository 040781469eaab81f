"""The next scheduled night: the systemd user timers `harness schedule --install` wrote.

systemctl is asked once, bounded in time and output; no answer (no user bus in a
container, no systemd, a hung manager) is a `timers: unknown (why)` line, never a failed
status: no timer line would read as "none scheduled". Only `harness-night-<campaign>.timer`
units are reported, as inert text."""

from __future__ import annotations

import re
import shutil
import subprocess

from harness.readers.report.inert import inert

TIMEOUT_S = 5.0
MAX_OUTPUT = 256 * 1024
PREFIX = "harness-night-"
_UNIT = re.compile(r"\b(" + re.escape(PREFIX) + r"[A-Za-z0-9:_.\\-]+)\.timer\b")
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
    try:
        r = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=TIMEOUT_S, env=_env())
    except (OSError, subprocess.SubprocessError) as e:
        return [], inert(f"systemctl: {type(e).__name__}", 200)
    if r.returncode != 0:
        why = r.stderr[:MAX_OUTPUT].decode("utf-8", "replace").strip().splitlines()
        return [], inert("systemd user bus unreachable: "
                         f"{why[0] if why else f'systemctl --user exit {r.returncode}'}", 200)
    return parse_timers(r.stdout[:MAX_OUTPUT].decode("utf-8", "replace")), None


def _env() -> dict[str, str]:
    """The environment for systemctl: this one, without a pager or colour to confuse it."""
    import os

    return {**os.environ, "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0", "LC_ALL": "C"}

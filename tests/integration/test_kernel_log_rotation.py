"""The kernel-log window across a log rotation, through real runs on the real Docker
engine: the host's log file is rotated while the container runs, as logrotate does it
(renamed, then a new file; or copied and truncated in place), and a GPU reset written
inside the window must still refuse the run, or the part that cannot be read must."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.integration.test_run_window_evidence import RESET, SLEEP, _runs, _when_running

SYSLOG = "Dec  3 09:00:01 node1 kernel: "
QUIET = "Dec  3 09:00:02 node1 kernel: [ 1.0] eth0: link up\n"


def _reset_line() -> str:
    return SYSLOG + RESET.split("] ", 1)[1] + "\n"


def rename(kern) -> None:
    """logrotate's default: the writer still had the old file open, wrote the reset into
    it, the file is renamed to `.1`, and a new one starts."""
    with kern.open("a") as f:
        f.write(_reset_line())
    os.rename(kern, kern.with_name(kern.name + ".1"))
    kern.write_text(QUIET)


def copytruncate(kern) -> None:
    """logrotate's `copytruncate`: the reset is copied into `.1` (another inode), the file
    is cut to nothing in place, and the writer goes on in it."""
    with kern.open("a") as f:
        f.write(_reset_line())
    shutil.copyfile(kern, kern.with_name(kern.name + ".1"))
    with kern.open("r+") as f:
        f.truncate(0)
    with kern.open("a") as f:
        f.write(QUIET)


@pytest.mark.parametrize(("rotate", "required", "rules", "gaps"), [
    (rename, False, ["KERNEL-LOG-GPU-RESET"], 0),  # the renamed file is followed
    (rename, True, ["KERNEL-LOG-GPU-RESET"], 0),
    (copytruncate, True, ["KERNEL-LOG-GAP"], 1),  # the copy cannot be told: a gap refuses
    (copytruncate, False, [], 1),  # ... and is noted where the log is not required
])
def test_a_rotation_inside_the_window_loses_no_fault(project, cleanup_containers, rotate,
                                                     required, rules, gaps):
    kern = project.root / "kern.log"
    kern.write_text(QUIET * 50)  # the mark lies inside a file with history
    extra = "kernel_log: {required: true}\n" if required else ""
    project.control("rotated", SLEEP.format(s=3) + extra)
    camp = project.campaign("rotation", ["rotated"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    watcher = _when_running(project, "rotated", lambda: rotate(kern))
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs),
                        "--no-json-lines", env={**os.environ, "HARNESS_KERNEL_LOG": str(kern)})
    watcher.join(timeout=5)
    [run] = _runs(project)
    rec = project.record(run)
    assert rec["rules"] == rules, r.stdout + r.stderr
    assert r.returncode == (1 if rules else 0), r.stdout + r.stderr
    assert len(rec["kernel_log"]["gaps"]) == gaps, rec["kernel_log"]
    check = project.harness("verify", str(run))
    assert check.returncode == 0, check.stdout + check.stderr

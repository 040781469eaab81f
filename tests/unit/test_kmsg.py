"""Reading the kernel log over a run's window (harness/measure/kmsg.py): a log file that
grows (the window is what was appended), this machine's real /dev/kmsg (root here), and
the sources that cannot be read (a note, never an exception)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.judge.kernellog import Tally, findings
from harness.measure import kmsg

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernellog"


def test_a_file_source_keeps_only_what_was_appended(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text((FIXTURES / "amdgpu-gfx-ring-timeout.dmesg").read_text())  # before
    start = kmsg.mark({kmsg.ENV: str(log)})
    assert (start.kind, start.error, start.offset) == ("file", None, log.stat().st_size)
    with log.open("a") as f:
        f.write("[ 9.000001] quiet line\n[ 9.5] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!\n"
                "half a li")
    window = kmsg.read(start)
    assert window.lines == ("[ 9.000001] quiet line",
                            "[ 9.5] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!")
    assert [f.rule for f in findings(window.records)] == ["KERNEL-LOG-GPU-RESET"]


def test_a_file_truncated_in_place_is_read_from_its_start_after_a_gap(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("x" * 1000 + "\n")
    start = kmsg.mark({kmsg.ENV: str(log)})
    log.write_text("Dec  3 09:00:00 host kernel: mce: [Hardware Error]: Machine check events "
                   "logged\n")
    window = kmsg.read(start)
    assert [f.rule for f in findings(window.records)] == ["KERNEL-LOG-MCE"]
    assert [g.where for g in window.gaps] == [str(log)] and "truncated" in window.gaps[0].why


def test_a_flood_is_judged_whole_and_kept_bounded(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line is handed to the judge; the first ones are kept, and a fault line past
    them too, in the reserve."""
    monkeypatch.setattr(kmsg, "MAX_BYTES", 1300)
    monkeypatch.setattr(kmsg, "RESERVE", 300)
    log = tmp_path / "kern.log"
    log.write_text("")
    start = kmsg.mark({kmsg.ENV: str(log)})
    reset = "[ 3.0] amdgpu 0000:28:00.0: GPU reset begin!. Source:  1"
    log.write_text("[ 1.0] " + "y" * 90 + "\n" + ("[ 2.0] " + "z" * 90 + "\n") * 50
                   + reset + "\n")
    tally = Tally()
    window = kmsg.read(start, each=tally.add)
    assert window.read == 52 and window.truncated
    assert sum(len(x) + 1 for x in window.lines) <= 1300
    assert window.lines[0].startswith("[ 1.0] y") and window.lines[-1] == reset
    assert [f.rule for f in tally.findings()] == ["KERNEL-LOG-GPU-RESET"]


def test_unreadable_sources_are_said_not_raised(tmp_path: Path) -> None:
    start = kmsg.mark({kmsg.ENV: str(tmp_path / "absent.log")})
    window = kmsg.read(start)
    assert not window.readable and "absent.log" in window.error and window.lines == ()
    empty = tmp_path / "bin"
    empty.mkdir()
    dmesg = kmsg.mark({kmsg.ENV: kmsg.DMESG, "PATH": str(empty)})  # no dmesg on the PATH
    assert dmesg.kind == "dmesg" and "FileNotFoundError" in dmesg.error
    assert kmsg.read(dmesg).error == dmesg.error


def test_dmesg_window_is_after_the_newest_line_at_the_mark(tmp_path: Path) -> None:
    """A `dmesg` that prints a fixture, then more: the window is what came after."""
    out = tmp_path / "out.txt"
    out.write_text("[  1.000000] boot\n[  2.000000] later\n")
    fake = tmp_path / "bin" / "dmesg"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexec /bin/cat {out}\n")
    fake.chmod(0o755)
    env = {kmsg.ENV: kmsg.DMESG, "PATH": str(fake.parent)}
    start = kmsg.mark(env)
    assert (start.kind, start.usec, start.error) == ("dmesg", 2_000_000, None)
    out.write_text(out.read_text() + "[  3.250000] amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, "
                   "signaled seq=57638, emitted seq=57641\n")
    window = kmsg.read(start, env)
    assert [r.usec for r in window.records] == [3_250_000]
    assert [f.rule for f in findings(window.records)] == ["KERNEL-LOG-RING-TIMEOUT"]


def test_the_real_kmsg_window_is_read_from_its_mark() -> None:
    """On this project's machines the tests run as root, who may read /dev/kmsg (never
    written here: a test's line would sit in every other run's window on the host);
    elsewhere the mark must say why it cannot (never raise)."""
    start = kmsg.mark({})
    if os.geteuid() != 0:
        assert start.error is not None or start.kind == "dmesg"
        return
    assert (start.kind, start.error) == ("kmsg", None) and start.seq >= 0
    window = kmsg.read(start)
    assert all(start.usec <= r.usec <= window.end_usec for r in window.records)
    assert all(r.seq > start.seq for r in window.records if r.seq is not None)



"""Read the kernel log over a run's window: from the lock taken to the seal.

Where the lines come from, in order:
- `HARNESS_KERNEL_LOG` names a file the kernel's lines are appended to (`/var/log/kern.log`
  where rsyslog writes one and `/dev/kmsg` is closed to the harness's user; a test's
  fixture): the window is the bytes appended between the mark and the read;
- otherwise `/dev/kmsg` (every record, `PRIO,SEQ,USEC,FLAGS;TEXT`, its USEC on the
  kernel's monotonic clock, the clock `time.monotonic` reads): the window is the records
  stamped between the two instants;
- otherwise `dmesg` (its `[  SEC.USEC]` lines, the same clock), where the host allows it
  and not `/dev/kmsg` (`HARNESS_KERNEL_LOG=dmesg` chooses it).
Where none can be read, the window says why (`error`) and the run goes on: the kernel log
is evidence a run gains where the host allows it, and a refusal only for a control that
asks for it (`kernel_log: {required: true}`).

This module reads; what the lines mean is `harness.judge.kernellog`'s to decide.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

ENV = "HARNESS_KERNEL_LOG"
KMSG = "/dev/kmsg"
DMESG = "dmesg"
MAX_RECORDS = 100_000  # the ring buffer holds a few thousand; a window more is a flood
MAX_BYTES = 4 * 1024 * 1024  # kept in the run folder, at most
DMESG_TIMEOUT_S = 10.0
KINDS = ("kmsg", "dmesg", "file")
MAX_TEXT = 1000  # one record's text, at most (the kernel's own limit is about this)

_KMSG = re.compile(r"([0-9]+),([0-9]+),([0-9]+),[^;]*;(.*)")
_DMESG = re.compile(r"\[\s*([0-9]+)\.([0-9]{1,6})\]\s?(.*)")


@dataclass(frozen=True)
class Record:
    """One kernel log record: when (microseconds on the kernel's log clock) and what it
    said; `/dev/kmsg` also numbers each record (`seq`)."""

    usec: int
    text: str
    seq: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Mark:
    """Where a run's window starts: the source chosen, and its position then."""

    source: str  # /dev/kmsg, dmesg, or the file's path
    kind: str  # one of KINDS
    usec: int = 0  # the newest record's time at the mark (the window is after it)
    seq: int = -1  # /dev/kmsg: the newest record's number at the mark
    offset: int = 0  # a file: its size at the mark
    error: str | None = None  # the source cannot be read: why (the window will say so)


@dataclass(frozen=True)
class Window:
    """The kernel's lines from the mark to the read, as read (bounded)."""

    source: str
    kind: str
    start_usec: int = 0  # the newest record's time at the mark (kernel clock)
    end_usec: int = 0  # the window's last record's time
    lines: tuple[str, ...] = ()
    records: tuple[Record, ...] = ()
    truncated: bool = False
    error: str | None = None

    @property
    def readable(self) -> bool:
        return self.error is None


def record(line: str) -> Record | None:
    """Pure: a `/dev/kmsg` record or a `dmesg` line; None for anything else (a
    continuation line, a header, garbage)."""
    line = line.rstrip("\n")
    kmsg = _KMSG.fullmatch(line)
    if kmsg is not None:
        return Record(int(kmsg.group(3)), kmsg.group(4)[:MAX_TEXT], int(kmsg.group(2)))
    dmesg = _DMESG.match(line)
    if dmesg is not None:
        usec = int(dmesg.group(1)) * 1_000_000 + int(dmesg.group(2).ljust(6, "0"))
        return Record(usec, dmesg.group(3)[:MAX_TEXT])
    return None


def window(records: Iterable[Record], start_usec: int, end_usec: int) -> list[Record]:
    """Pure: the records from `start_usec` to `end_usec` (both on the boot clock)."""
    return [r for r in records if start_usec <= r.usec <= end_usec]


def mark(env: Mapping[str, str] | None = None) -> Mark:
    """Choose the source and note where the window starts: after the newest record there
    now (its number on /dev/kmsg, its time from dmesg, the file's size). The kernel's log
    clock is not quite the clock a process reads (it ran milliseconds ahead of
    CLOCK_MONOTONIC on this project's machines), so the window is never cut by the
    process's clock. Never raises: a source that cannot be read is a mark with an error."""
    env = os.environ if env is None else env
    chosen = env.get(ENV, "")
    if chosen and chosen != DMESG:
        try:
            return Mark(chosen, "file", offset=os.stat(chosen).st_size)
        except OSError as e:
            return Mark(chosen, "file", error=f"{chosen}: {e.strerror or e}")
    kmsg_error = None
    if not chosen:
        lines, kmsg_error = _kmsg_lines()
        if kmsg_error is None:
            newest = _newest(lines)
            return Mark(KMSG, "kmsg", newest.usec if newest else 0,
                        seq=newest.seq if newest and newest.seq is not None else -1)
    lines, error = _dmesg(env)
    if error is None:
        newest = _newest(lines)
        return Mark(DMESG, "dmesg", newest.usec if newest else -1)
    both = f"{kmsg_error}; {error}" if kmsg_error else error
    return Mark(KMSG if kmsg_error else DMESG, "kmsg" if kmsg_error else "dmesg", error=both)


def _newest(lines: list[str]) -> Record | None:
    for line in reversed(lines):
        found = record(line)
        if found is not None:
            return found
    return None


def read(start: Mark, env: Mapping[str, str] | None = None) -> Window:
    """The window from `start` to now. Never raises: what could not be read is the error."""
    base = Window(start.source, start.kind, start.usec, start.usec, error=start.error)
    if start.error is not None:
        return base
    if start.kind == "file":
        return _file_window(start, base)
    if start.kind == "kmsg":
        lines, error = _kmsg_lines()
    else:
        lines, error = _dmesg(os.environ if env is None else env)
    if error is not None:
        return Window(start.source, start.kind, start.usec, start.usec, error=error)
    parsed = [(line, r) for line in lines if (r := record(line)) is not None]
    if start.kind == "kmsg":
        kept = [(line, r) for line, r in parsed if r.seq is not None and r.seq > start.seq]
    else:
        kept = [(line, r) for line, r in parsed if r.usec > start.usec]
    end = kept[-1][1].usec if kept else start.usec
    return _bounded(Window(start.source, start.kind, start.usec, end), kept)


def _bounded(base: Window, kept: list[tuple[str, Record]]) -> Window:
    """At most MAX_RECORDS lines and MAX_BYTES of them; the first ones are kept (a fault
    shows at its start, and a flood after it adds nothing)."""
    out: list[tuple[str, Record]] = []
    size = 0
    for line, r in kept[:MAX_RECORDS]:
        size += len(line.encode("utf-8", "replace")) + 1
        if size > MAX_BYTES:
            break
        out.append((line, r))
    return Window(base.source, base.kind, base.start_usec, base.end_usec,
                  lines=tuple(line for line, _ in out), records=tuple(r for _, r in out),
                  truncated=len(out) < len(kept))


def _kmsg_lines() -> tuple[list[str], str | None]:
    """Every record in the ring buffer now: one read() is one record; EPIPE means the
    next ones were overwritten meanwhile (read on), EAGAIN that none is left."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return [], f"{KMSG}: {e.strerror or e}"
    lines: list[str] = []
    try:
        while len(lines) < 4 * MAX_RECORDS:
            try:
                chunk = os.read(fd, 16 * 1024)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:
                    continue
                return lines, f"{KMSG}: {e.strerror or e}"
            if not chunk:
                break
            # a record's continuation lines (" KEY=value") follow its first line
            lines.append(chunk.decode("utf-8", "replace").split("\n", 1)[0])
    finally:
        os.close(fd)
    return lines, None


def _dmesg(env: Mapping[str, str]) -> tuple[list[str], str | None]:
    """`dmesg`'s lines (util-linux: `[  SEC.USEC] text`), or why it gave none."""
    try:
        done = subprocess.run([DMESG], capture_output=True, timeout=DMESG_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False,
                              env={"PATH": env.get("PATH", os.defpath), "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"{DMESG}: {type(e).__name__}: {e}"[:300]
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return [], f"{DMESG}: exit {done.returncode}: {err[0] if err else 'no output'}"[:300]
    return done.stdout[: 8 * MAX_BYTES].decode("utf-8", "replace").splitlines(), None


def _file_window(start: Mark, base: Window) -> Window:
    """The lines appended to the file since the mark (from its start when it shrank: it
    was rotated or truncated, and the lines before are in the rotated file). A line with
    no kernel timestamp (a syslog line) is kept with time 0."""
    try:
        with open(start.source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            offset = start.offset if size >= start.offset else 0
            f.seek(offset)
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        return Window(start.source, start.kind, error=f"{start.source}: {e.strerror or e}")
    truncated = len(data) > MAX_BYTES
    text = data[:MAX_BYTES].decode("utf-8", "replace")
    if truncated or not text.endswith("\n"):  # a half line is left for nobody
        text = text.rsplit("\n", 1)[0] + "\n" if "\n" in text else ""
    lines = [line for line in text.split("\n") if line]
    kept = [(line, record(line) or Record(0, line)) for line in lines]
    window = _bounded(base, kept)
    return Window(window.source, window.kind, window.start_usec, window.end_usec,
                  lines=window.lines, records=window.records,
                  truncated=window.truncated or truncated)

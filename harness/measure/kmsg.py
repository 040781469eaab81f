"""Read the kernel log over a run's window: from the lock taken to the seal.

Where the lines come from, in order:
- `HARNESS_KERNEL_LOG` names a file the kernel's lines are appended to (`/var/log/kern.log`
  where rsyslog writes one and `/dev/kmsg` is closed to the harness's user; a test's
  fixture): the window is the bytes appended after the mark. The mark names the file by
  device and inode, its size then, and a digest of the bytes just before that size, so a
  rotation (the file renamed, a new one in its place), a copy-truncation or a rewrite is
  seen at the read, whatever the new file's size: the renamed file is followed where it
  still holds the marked inode under `<name>.1`; what cannot be read is a gap;
- otherwise `/dev/kmsg` (every record, `PRIO,SEQ,USEC,FLAGS;TEXT`, its USEC on the
  kernel's monotonic clock): the window is the records numbered after the newest one at
  the mark. A number skipped inside the window (the ring buffer overwrote records before
  they were read, which a read answers with EPIPE) is a gap;
- otherwise `dmesg` (its `[  SEC.USEC]` lines, the same clock), where the host allows it
  and not `/dev/kmsg` (`HARNESS_KERNEL_LOG=dmesg` chooses it): a ring that no longer holds
  the mark's newest line has lost the window's first lines, a gap.
Where none can be read, the window says why (`error`) and the run goes on: the kernel log
is evidence a run gains where the host allows it, and a refusal only for a control that
asks for it (`kernel_log: {required: true}`).

The whole window is read line by line and each record handed to the caller's `each` as it
is read, so it is judged whole with bounded memory; the lines kept for the run folder are
bounded (the first ones, and those `each` asks to keep). This module reads; what the lines
mean is `harness.judge.kernellog`'s to decide.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

ENV = "HARNESS_KERNEL_LOG"
KMSG = "/dev/kmsg"
DMESG = "dmesg"
MAX_RECORDS = 100_000  # lines kept in the run folder, at most
MAX_BYTES = 4 * 1024 * 1024  # kept in the run folder, at most (the reserve included)
RESERVE = 64 * 1024  # of MAX_BYTES, for the lines `each` asks to keep past the first ones
MAX_LINE = 2048  # bytes of one line, at most (the rest of a longer line is skipped)
MAX_TEXT = 1000  # one record's text, at most (the kernel's own limit is about this)
MAX_READ = 2_000_000  # records or lines read from one source, at most: past it is a gap
MAX_READ_BYTES = 2 * 1024 ** 3  # bytes read from a file's window, at most: past it is a gap
TAIL = 4096  # bytes before a file's mark whose digest says it is still the same file
DMESG_TIMEOUT_S = 10.0
KINDS = ("kmsg", "dmesg", "file")
ROTATED = ".1"  # where logrotate (and rsyslog's own rotation) renames the file it rotates

_KMSG = re.compile(r"([0-9]+),([0-9]+),([0-9]+),[^;]*;(.*)")
_DMESG = re.compile(r"\[\s*([0-9]+)\.([0-9]{1,6})\]\s?(.*)")
_CALLER = re.compile(r"\[\s*[TC][0-9]+\] ")  # CONFIG_PRINTK_CALLER's "[T1234] " in dmesg
# A syslog line: its time (traditional `Dec  3 09:00:01`, or RFC 3339), the host, the tag
# (a process's own name, `kernel` for the kernel's lines) and an optional [pid].
_SYSLOG = re.compile(r"(?:[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2}"
                     r"|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(?:Z|[+-][0-9]{2}:?[0-9]{2})?)"
                     r" (\S+) ([^\s\[:]+)(?:\[[0-9]+\])?: ?(.*)")


@dataclass(frozen=True)
class Record:
    """One kernel log record: when (microseconds on the kernel's log clock) and what it
    said; `/dev/kmsg` also numbers each record (`seq`). `kernel` is False where the source
    itself marks the line as a process's, not the kernel's: a `/dev/kmsg` record of a
    facility other than the kernel's (the kernel gives every record written from user
    space a user facility), or a syslog line tagged with another name than `kernel`."""

    usec: int
    text: str
    seq: int | None = field(default=None, compare=False)
    kernel: bool = field(default=True, compare=False)


@dataclass(frozen=True)
class Gap:
    """Part of the window that could not be read: which source, and why."""

    where: str
    why: str

    def detail(self) -> str:
        return f"{self.where}: {self.why}"


@dataclass(frozen=True)
class Mark:
    """Where a run's window starts: the source chosen, and its position then."""

    source: str  # /dev/kmsg, dmesg, or the file's path
    kind: str  # one of KINDS
    usec: int = 0  # the newest record's time at the mark (the window is after it)
    seq: int = -1  # /dev/kmsg: the newest record's number at the mark
    offset: int = 0  # a file: its size at the mark
    error: str | None = None  # the source cannot be read: why (the window will say so)
    device: int = -1  # a file: its st_dev at the mark (-1: not known)
    inode: int = -1  # a file: its st_ino at the mark (-1: not known)
    tail: str = ""  # a file: sha256 of its TAIL bytes before `offset` at the mark

    def recorded(self) -> dict:
        """What run.json keeps of the mark: enough to say which file, or which record."""
        if self.kind == "file":
            return {"device": self.device, "inode": self.inode, "offset": self.offset,
                    "tail_sha256": self.tail or None}
        if self.kind == "kmsg":
            return {"seq": self.seq, "usec": self.usec}
        return {"usec": self.usec}


@dataclass(frozen=True)
class Window:
    """The kernel's lines from the mark to the read: `read` of them were read (and handed
    to the caller one by one), `lines` are those kept (bounded), `gaps` what could not be
    read."""

    source: str
    kind: str
    start_usec: int = 0  # the newest record's time at the mark (kernel clock)
    end_usec: int = 0  # the window's last record's time
    lines: tuple[str, ...] = ()
    records: tuple[Record, ...] = ()
    truncated: bool = False
    error: str | None = None
    read: int = 0
    gaps: tuple[Gap, ...] = ()

    @property
    def readable(self) -> bool:
        return self.error is None


def record(line: str) -> Record | None:
    """Pure: a `/dev/kmsg` record, a `dmesg` line or a syslog line; None for anything
    else (a continuation line, a header, garbage)."""
    line = line.rstrip("\n")
    kmsg = _KMSG.fullmatch(line)
    if kmsg is not None:
        return Record(int(kmsg.group(3)), kmsg.group(4)[:MAX_TEXT], int(kmsg.group(2)),
                      kernel=int(kmsg.group(1)) >> 3 == 0)
    dmesg = _DMESG.match(line)
    if dmesg is not None:
        usec = int(dmesg.group(1)) * 1_000_000 + int(dmesg.group(2).ljust(6, "0"))
        return Record(usec, _uncalled(dmesg.group(3))[:MAX_TEXT])
    syslog = _SYSLOG.fullmatch(line)
    if syslog is not None:
        text = syslog.group(3)
        inner = _DMESG.match(text)
        if inner is not None:  # rsyslog's imklog keeps the kernel's own stamp
            usec = int(inner.group(1)) * 1_000_000 + int(inner.group(2).ljust(6, "0"))
            return Record(usec, _uncalled(inner.group(3))[:MAX_TEXT],
                          kernel=syslog.group(2) == "kernel")
        return Record(0, text[:MAX_TEXT], kernel=syslog.group(2) == "kernel")
    return None


def _uncalled(text: str) -> str:
    caller = _CALLER.match(text)
    return text[caller.end():] if caller else text


def window(records: Iterable[Record], start_usec: int, end_usec: int) -> list[Record]:
    """Pure: the records from `start_usec` to `end_usec` (both on the boot clock)."""
    return [r for r in records if start_usec <= r.usec <= end_usec]


def kmsg_records(chunks: Iterable[bytes | None]) -> Iterator[tuple[str, Record] | None]:
    """Pure: the records in what reads of `/dev/kmsg` gave (or a file in its syntax): one
    (line, record) per record's first line, its continuation lines (` KEY=value`) dropped;
    None where a read said the ring overwrote what was next (EPIPE)."""
    rest = b""
    for chunk in chunks:
        if chunk is None:
            yield None
            continue
        rest += chunk
        *whole, rest = rest.split(b"\n")
        if len(rest) > 64 * 1024:  # no record is this long: a stand-in with no newline
            rest = b""
        for raw in whole:
            if raw[:1] in (b" ", b""):
                continue
            line = raw[:MAX_LINE].decode("utf-8", "replace")
            found = record(line)
            if found is not None and found.seq is not None:
                yield line, found


class _Kept:
    """The window as it is read: every record goes to `each`; the first lines are kept up
    to MAX_BYTES less RESERVE, and those `each` asks to keep in the reserve after them."""

    def __init__(self, each: Callable[[Record], bool] | None) -> None:
        self.each = each
        self.lines: list[str] = []
        self.records: list[Record] = []
        self.size = 0
        self.reserved = 0
        self.read = 0
        self.last_usec: int | None = None
        self.gaps: list[Gap] = []

    def add(self, line: str, found: Record) -> None:
        self.read += 1
        self.last_usec = found.usec
        wanted = self.each(found) if self.each is not None else False
        size = len(line.encode("utf-8", "replace")) + 1
        if len(self.lines) < MAX_RECORDS and self.size + size <= MAX_BYTES - RESERVE:
            self.size += size
        elif wanted and self.reserved + size <= RESERVE:
            self.reserved += size
        else:
            return
        self.lines.append(line)
        self.records.append(found)

    def gap(self, where: str, why: str) -> None:
        self.gaps.append(Gap(where, why))

    def window(self, start: Mark, end_usec: int, error: str | None = None) -> Window:
        return Window(start.source, start.kind, start.usec, end_usec,
                      lines=tuple(self.lines), records=tuple(self.records),
                      truncated=len(self.lines) < self.read, error=error, read=self.read,
                      gaps=tuple(self.gaps))


def mark(env: Mapping[str, str] | None = None) -> Mark:
    """Choose the source and note where the window starts: after the newest record there
    now (its number on /dev/kmsg, its time from dmesg, the file's size and identity). The
    kernel's log clock is not quite the clock a process reads (it ran milliseconds ahead
    of CLOCK_MONOTONIC on this project's machines), so the window is never cut by the
    process's clock. Never raises: a source that cannot be read is a mark with an error."""
    env = os.environ if env is None else env
    chosen = env.get(ENV, "")
    if chosen and chosen != DMESG:
        return _file_mark(chosen)
    kmsg_error = None
    if not chosen:
        newest: list[Record] = []
        kmsg_error, flooded = _kmsg_stream(lambda _line, found: _newest(newest, found))
        kmsg_error = kmsg_error or flooded
        if kmsg_error is None:
            last = newest[0] if newest else None
            return Mark(KMSG, "kmsg", last.usec if last else 0,
                        seq=last.seq if last and last.seq is not None else -1)
    newest_line: list[Record] = []
    error = _dmesg_stream(env, lambda line: _newest(newest_line, record(line)))
    if error is None:
        return Mark(DMESG, "dmesg", newest_line[0].usec if newest_line else -1)
    both = f"{kmsg_error}; {error}" if kmsg_error else error
    return Mark(KMSG if kmsg_error else DMESG, "kmsg" if kmsg_error else "dmesg", error=both)


def _newest(holder: list[Record], found: Record | None) -> None:
    if found is not None:
        holder[:] = [found]


def _file_mark(path: str) -> Mark:
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            f.seek(max(0, size - TAIL))
            tail = f.read(size - max(0, size - TAIL))
    except OSError as e:
        return Mark(path, "file", error=f"{path}: {e.strerror or e}")
    return Mark(path, "file", offset=size, device=st.st_dev, inode=st.st_ino,
                tail=hashlib.sha256(tail).hexdigest())


def read(start: Mark, env: Mapping[str, str] | None = None,
         each: Callable[[Record], bool] | None = None) -> Window:
    """The window from `start` to now, every record of it handed to `each` in order (which
    answers whether that record must be kept past the first lines). Never raises: what
    could not be read at all is the error, a part that could not be read a gap."""
    if start.error is not None:
        return Window(start.source, start.kind, start.usec, start.usec, error=start.error)
    kept = _Kept(each)
    if start.kind == "file":
        error = _file_window(start, kept)
        return kept.window(start, start.usec, error)
    if start.kind == "kmsg":
        error = _kmsg_window(start, kept)
    else:
        error = _dmesg_window(start, kept, os.environ if env is None else env)
    if error is not None:
        return Window(start.source, start.kind, start.usec, start.usec, error=error)
    end = kept.last_usec if kept.last_usec is not None else start.usec
    return kept.window(start, end)


def _kmsg_window(start: Mark, kept: _Kept) -> str | None:
    """The records numbered after the mark's; a number skipped after it is a gap (the ring
    overwrote those records before they were read), and so is an overwrite said by the
    last read with no record after it."""
    state = {"next": start.seq + 1, "overrun": False}

    def add(line: str | None, found: Record | None) -> None:
        if found is None:
            state["overrun"] = True
            return
        seq = found.seq if found.seq is not None else -1
        if seq <= start.seq:
            state["overrun"] = False
            return
        if seq > state["next"]:
            skipped = seq - state["next"]
            kept.gap(KMSG, f"{skipped} record(s) numbered {state['next']} to {seq - 1} were "
                           "overwritten in the ring buffer before they were read")
        state["next"], state["overrun"] = seq + 1, False
        kept.add(line or "", found)

    error, flooded = _kmsg_stream(add, overruns=True)
    if error is None and state["overrun"]:
        kept.gap(KMSG, "the ring buffer overwrote records while they were read")
    if flooded is not None:
        kept.gap(KMSG, flooded)
    return error


def _kmsg_stream(add: Callable, overruns: bool = False) -> tuple[str | None, str | None]:
    """Hand every record in the ring buffer now to `add(line, record)`, and an overwrite
    (EPIPE) to `add(None, None)` when `overruns`: one read() is one record, EAGAIN says
    none is left. Returns why it could not be read, and why it stopped before the end
    (records kept coming past MAX_READ), each None when it did not."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return f"{KMSG}: {e.strerror or e}", None
    failed: list[str] = []

    def chunks() -> Iterator[bytes | None]:
        while True:
            try:
                chunk = os.read(fd, 16 * 1024)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno == errno.EPIPE:
                    yield None
                    continue
                failed.append(f"{KMSG}: {e.strerror or e}")
                return
            if not chunk:
                return
            yield chunk

    count = 0
    try:
        for event in kmsg_records(chunks()):
            if event is None:
                if overruns:
                    add(None, None)
                continue
            count += 1
            if count > MAX_READ:
                return None, f"stopped after {MAX_READ} records: more kept coming"
            add(*event)
    finally:
        os.close(fd)
    return (failed[0] if failed else None), None


def _dmesg_window(start: Mark, kept: _Kept, env: Mapping[str, str]) -> str | None:
    """The lines stamped after the mark's newest; a ring whose oldest line is newer than
    the mark's has lost the lines between (a gap)."""
    state = {"first": True}

    def add(line: str) -> None:
        found = record(line)
        if found is None:
            return
        if state["first"]:
            state["first"] = False
            if start.usec >= 0 and found.usec > start.usec:
                kept.gap(DMESG, "the ring buffer no longer holds the mark's newest line: "
                                "the lines before its oldest one were overwritten")
        if found.usec > start.usec:
            kept.add(line[:MAX_LINE], found)

    return _dmesg_stream(env, add)


def _dmesg_stream(env: Mapping[str, str], add: Callable[[str], None]) -> str | None:
    """`dmesg`'s lines (util-linux: `[  SEC.USEC] text`), each to `add` as it is printed,
    or why it gave none; killed past DMESG_TIMEOUT_S."""
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([DMESG], stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.DEVNULL,
                                    env={"PATH": env.get("PATH", os.defpath), "LC_ALL": "C"})
        except OSError as e:
            return f"{DMESG}: {type(e).__name__}: {e}"[:300]
        timer = threading.Timer(DMESG_TIMEOUT_S, proc.kill)
        timer.start()
        count = 0
        try:
            for raw in _lines(proc.stdout) if proc.stdout is not None else ():
                count += 1
                if count > MAX_READ:
                    proc.kill()
                    return f"{DMESG}: stopped after {MAX_READ} lines"
                add(raw.decode("utf-8", "replace"))
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        if code != 0:
            err.seek(0)
            first = err.read(300).decode("utf-8", "replace").strip().splitlines()
            return f"{DMESG}: exit {code}: {first[0] if first else 'no output'}"[:300]
    return None


def _lines(f: BinaryIO, whole_only: bool = False) -> Iterator[bytes]:
    """The lines of `f`, without their newline, each cut at MAX_LINE bytes (the rest of a
    longer line is skipped, never held); a last line with no newline is left out when
    `whole_only` (a line still being written)."""
    while True:
        line = f.readline(MAX_LINE + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1][:MAX_LINE]
            continue
        if len(line) <= MAX_LINE:  # the end of the file, with no newline
            if not whole_only:
                yield line
            return
        while True:  # a longer line: skip to its end
            more = f.readline(64 * 1024)
            if not more or more.endswith(b"\n"):
                break
        if more.endswith(b"\n") or not whole_only:
            yield line[:MAX_LINE]
        if not more:
            return


def _file_window(start: Mark, kept: _Kept) -> str | None:
    """The lines appended to the marked file since the mark, then the lines of the file
    now at its path when that is another (the marked one was rotated). A marked file not
    found (renamed elsewhere, compressed, deleted), shrunk or rewritten before the mark
    (copy-truncated, then written again) is a gap, and the file now at the path is read
    from its start. A line with no kernel timestamp is kept with time 0."""
    path = start.source
    try:
        current = open(path, "rb")  # noqa: SIM115 - closed below, on every path
    except FileNotFoundError:
        current = None
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    try:
        now = os.fstat(current.fileno()) if current is not None else None
        if now is not None and _same(now, start):
            _from_mark(current, path, start, kept, whole_only=True)
            return None
        rotated = _rotated(path, start)
        if rotated is not None:
            with rotated as f:
                _from_mark(f, path + ROTATED, start, kept, whole_only=False)
        else:
            kept.gap(path, "the marked file (device "
                           f"{start.device}, inode {start.inode}) was rotated out of reach: "
                           "the lines appended to it after the mark could not be read")
        if current is not None:
            _stream(current, path, 0, kept, whole_only=True)
        return None
    except OSError as e:
        kept.gap(path, f"read failed: {e.strerror or e}")
        return None
    finally:
        if current is not None:
            current.close()


def _same(st: os.stat_result, start: Mark) -> bool:
    return start.inode < 0 or (st.st_dev, st.st_ino) == (start.device, start.inode)


def _rotated(path: str, start: Mark) -> BinaryIO | None:
    """The marked file where a rotation renamed it (`<name>.1` in the same folder, still
    the marked device and inode), opened; None where it is not there."""
    if start.inode < 0:
        return None
    try:
        f = open(path + ROTATED, "rb")  # noqa: SIM115 - the caller closes it
    except OSError:
        return None
    if _same(os.fstat(f.fileno()), start):
        return f
    f.close()
    return None


def _from_mark(f: BinaryIO, where: str, start: Mark, kept: _Kept, whole_only: bool) -> None:
    """The marked file's lines after the mark; from its start, after a gap, when it is
    shorter than the mark or its bytes before the mark are no longer those marked."""
    size = os.fstat(f.fileno()).st_size
    offset = start.offset
    if size < offset:
        kept.gap(where, f"truncated in the window ({size} bytes, {offset} at the mark): the "
                        "lines appended between the mark and the truncation were lost")
        _stream(f, where, 0, kept, whole_only)
        return
    begin = max(0, offset - TAIL)
    f.seek(begin)
    before = f.read(offset - begin)
    if start.tail and hashlib.sha256(before).hexdigest() != start.tail:
        kept.gap(where, "rewritten in the window (its bytes before the mark changed: "
                        "truncated and written again): the lines between were lost")
        _stream(f, where, 0, kept, whole_only)
        return
    f.seek(offset)
    if before and not before.endswith(b"\n"):  # the mark fell inside a line: not this run's
        while (part := f.readline(64 * 1024)) and not part.endswith(b"\n"):
            pass
    _stream(f, where, f.tell(), kept, whole_only)


def _stream(f: BinaryIO, where: str, offset: int, kept: _Kept, whole_only: bool) -> None:
    f.seek(offset)
    for raw in _lines(f, whole_only):
        if f.tell() - offset > MAX_READ_BYTES:
            kept.gap(where, f"stopped after reading {MAX_READ_BYTES} bytes of it")
            return
        if raw:
            line = raw.decode("utf-8", "replace")
            kept.add(line, record(line) or Record(0, line[:MAX_TEXT]))

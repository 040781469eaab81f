"""Read the kernel log over a run's window: from the lock taken to the seal.

Sources, in order: the file `HARNESS_KERNEL_LOG` names (rsyslog's kern.log where
/dev/kmsg is closed to the harness; a test's fixture), marked by device, inode, size and a
digest of the bytes before that size, so a rotation, copy-truncation or rewrite is seen
(the renamed `<name>.1` is followed); else `/dev/kmsg` (records numbered after the mark's
newest; a skipped number is an overwritten gap); else `dmesg` (`HARNESS_KERNEL_LOG=dmesg`),
whose ring no longer holding the mark's newest line is a gap. Where none can be read the
window says why and the run goes on: the log is evidence, a refusal only where a control
asks for it. Records stream to the caller's `each` so memory stays bounded; what they mean
is `harness.judge.kernellog`'s to decide.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections import deque
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
    """One record: microseconds on the kernel's log clock, text, `/dev/kmsg`'s number.
    `kernel` is False where the source marks the line as a process's (a user facility on
    /dev/kmsg, a syslog tag other than `kernel`)."""

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
    """The lines from the mark to the read: `read` counted, `lines` kept (bounded)."""

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
    syslog = _SYSLOG.fullmatch(line) if not _DMESG.match(line) else None
    kernel = syslog is None or syslog.group(2) == "kernel"
    text = line if syslog is None else syslog.group(3)
    dmesg = _DMESG.match(text)  # rsyslog's imklog keeps the kernel's own stamp
    if dmesg is not None:
        usec = int(dmesg.group(1)) * 1_000_000 + int(dmesg.group(2).ljust(6, "0"))
        caller = _CALLER.match(dmesg.group(3))
        return Record(usec, dmesg.group(3)[caller.end() if caller else 0:][:MAX_TEXT],
                      kernel=kernel)
    return None if syslog is None else Record(0, text[:MAX_TEXT], kernel=kernel)


def kmsg_records(chunks: Iterable[bytes | None]) -> Iterator[tuple[str, Record] | None]:
    """Pure: (line, record) of each record in what reads of `/dev/kmsg` gave, continuation
    lines dropped; None where a read said the ring overwrote what was next (EPIPE)."""
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
    """Every record goes to `each`; the first lines are kept up to MAX_BYTES less RESERVE,
    then those `each` asks to keep, in the reserve."""

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
    """Choose the source and mark the newest record there now. Never by the process's clock:
    the kernel's log clock ran milliseconds ahead of CLOCK_MONOTONIC on this project's
    machines. Never raises: a source that cannot be read is a mark with an error."""
    env = os.environ if env is None else env
    chosen = env.get(ENV, "")
    if chosen and chosen != DMESG:
        return _file_mark(chosen)
    kmsg_error, newest = None, deque[Record](maxlen=1)
    if not chosen:
        kmsg_error, flooded = _kmsg_stream(lambda _line, found: newest.append(found))
        kmsg_error = kmsg_error or flooded
        if kmsg_error is None:
            last = newest[0] if newest else None
            return Mark(KMSG, "kmsg", last.usec if last else 0,
                        seq=last.seq if last and last.seq is not None else -1)
    newest.clear()
    error = _dmesg_stream(env, lambda line: newest.extend(filter(None, [record(line)])))
    if error is None:
        return Mark(DMESG, "dmesg", newest[0].usec if newest else -1)
    both = f"{kmsg_error}; {error}" if kmsg_error else error
    return Mark(KMSG if kmsg_error else DMESG, "kmsg" if kmsg_error else "dmesg", error=both)


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
    """The window from `start` to now, each record handed to `each` (which answers whether
    to keep it past the first lines). Never raises: unreadable is the error, a part a gap."""
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
    """The records numbered after the mark's; a skipped number, or an overwrite the last
    read said, is a gap."""
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
    """Every record in the ring now to `add(line, record)`, an overwrite (EPIPE) to
    `add(None, None)` when `overruns`. Returns (why unreadable, why stopped early)."""
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
    """The lines stamped after the mark's newest; an oldest line newer than it is a gap."""
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
    """`dmesg`'s lines each to `add`, or why it gave none; killed past DMESG_TIMEOUT_S."""
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
    """The lines of `f`, each cut at MAX_LINE bytes (the rest skipped, never held); a last
    line with no newline (still being written) is left out when `whole_only`."""
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
    """The lines appended to the marked file since the mark, then those of the file now at
    its path when that is another (rotated). A marked file gone, shrunk or rewritten is a
    gap. A line with no kernel timestamp is kept with time 0."""
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
    """The marked file opened where a rotation renamed it (`<name>.1`), or None."""
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
    """The lines after the mark; from the start, after a gap, when the file shrank or its
    bytes before the mark changed."""
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

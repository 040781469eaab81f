"""Copy a stream into a native log file with bounded memory, stamping times as it goes.

`stamps.jsonl` maps byte offsets to UTC times, so any line can be placed in time without
rewriting the native bytes."""

from __future__ import annotations

import json
import os
import threading
import time

from harness.base.timeutil import utc_now

BUF = 1 << 16
STAMP_EVERY_S = 1.0


class Pump(threading.Thread):
    """Drain `fd` into `path`; record (offset, time) stamps into `stamps` (a shared list)."""

    def __init__(self, name: str, fd: int, path: str, stamps_path: str, lock: threading.Lock):
        super().__init__(name=f"pump-{name}", daemon=True)
        self.stream = name
        self.fd = fd
        self.path = path
        self.stamps_path = stamps_path
        self.stamps_lock = lock
        self.bytes = 0
        self.error: str | None = None

    def _stamp(self, out, offset: int) -> None:
        line = json.dumps({"stream": self.stream, "offset": offset, "at": utc_now()})
        with self.stamps_lock:
            out.write(line + "\n")
            out.flush()

    def run(self) -> None:
        buf = bytearray(BUF)
        last = 0.0
        try:
            with open(self.path, "wb", buffering=0) as log, \
                 open(self.stamps_path, "a", buffering=1) as stamps:
                while True:
                    n = os.readv(self.fd, [buf])
                    if n == 0:
                        break
                    now = time.monotonic()
                    if now - last >= STAMP_EVERY_S:
                        self._stamp(stamps, self.bytes)
                        last = now
                    view = memoryview(buf)[:n]
                    while view:
                        w = log.write(view)
                        view = view[w:]
                    self.bytes += n
                self._stamp(stamps, self.bytes)
                os.fsync(log.fileno())
        except OSError as e:  # disk full: keep draining so the container is not blocked
            self.error = f"{type(e).__name__}: {e}"
            while os.read(self.fd, BUF):
                pass
        finally:
            os.close(self.fd)

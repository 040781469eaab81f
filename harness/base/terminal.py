"""The one owner of the process's terminal output: stdout and stderr, written best effort.

A reader that went away (`| head -1`) or a hung-up terminal must change nothing about a
run, its seal or its exit code: `install()` fills closed descriptors 0-2 with /dev/null and
wraps stdout and stderr so that, after a first failed write, they drop everything (and
Python's flush at exit cannot turn the exit code into 120).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import threading
from collections.abc import Mapping

from harness.base.states import State, Status

STANDARD_FDS = (0, 1, 2)


class BestEffort(io.TextIOBase):
    """A text stream over another one that swallows every error of writing to it."""

    def __init__(self, inner: io.TextIOBase | None) -> None:
        super().__init__()
        self._inner = inner
        self._dead = inner is None
        self._lock = threading.Lock()

    @property
    def dead(self) -> bool:
        """Whether a write failed (or there was no stream): everything is dropped now."""
        return self._dead

    @property
    def encoding(self) -> str:
        return getattr(self._inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self._inner, "errors", None) or "strict"

    @property
    def name(self) -> str:
        return str(getattr(self._inner, "name", "<best-effort>"))

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        """A dead stream is no terminal: nothing should wait for a person on it."""
        if self._dead:
            return False
        try:
            return bool(self._inner.isatty())
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self._inner is None:
            raise io.UnsupportedOperation("no stream behind this writer")
        return self._inner.fileno()

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # as a text stream does (click probes with b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self._dead:
            return len(text)
        try:
            self._inner.write(text)
        except UnicodeEncodeError:  # a character the terminal's encoding lacks: not a failure
            self._write_replaced(text)
        except (OSError, ValueError):
            self._die()
        return len(text)

    def _write_replaced(self, text: str) -> None:
        safe = text.encode(self.encoding, "replace").decode(self.encoding, "replace")
        try:
            self._inner.write(safe)
        except (OSError, ValueError):
            self._die()

    def flush(self) -> None:
        if self._dead:
            return
        try:
            self._inner.flush()
        except (OSError, ValueError):
            self._die()

    def close(self) -> None:
        """Flush only: the stream below belongs to the interpreter, not to this writer."""
        self.flush()

    def _die(self) -> None:
        """Drop everything from now on; point the failed descriptor at /dev/null."""
        with self._lock:
            if self._dead:
                return
            self._dead = True
            with contextlib.suppress(AttributeError, OSError, ValueError):
                _null_onto(self._inner.fileno())


def best_effort(stream: io.TextIOBase | None) -> BestEffort:
    """`stream` as a BestEffort writer (itself when it already is one)."""
    return stream if isinstance(stream, BestEffort) else BestEffort(stream)


def _null_onto(fd: int) -> None:
    """Make `fd` a descriptor on /dev/null (it may be open or closed)."""
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:  # a closed `fd` may be the very number os.open returned
        os.dup2(null, fd)
        os.close(null)


def open_standard_fds() -> None:
    """Put /dev/null onto each of descriptors 0, 1, 2 that is closed."""
    for fd in STANDARD_FDS:
        try:
            os.fstat(fd)
        except OSError:
            _null_onto(fd)


def install() -> None:
    """Make this process's stdout and stderr best effort (see the module's docstring)."""
    open_standard_fds()
    sys.stdout = best_effort(sys.stdout)
    sys.stderr = best_effort(sys.stderr)


def isatty(stream: io.TextIOBase | None) -> bool:
    """Is `stream` a live terminal? False for None, a closed or a dead stream."""
    try:
        return stream is not None and bool(stream.isatty())
    except (OSError, ValueError):
        return False


# The one colour per status word, on every surface (ls, show, status, report, a night's
# end lines); rich takes the same names. `ls`'s words for a folder with no sealed status too.
STATUS_COLOURS: dict[str, str] = {
    Status.ACCEPTED: "green", Status.REFUSED: "red", Status.FAILED: "red",
    Status.TIMED_OUT: "yellow", Status.INTERRUPTED: "yellow", State.RUNNING: "cyan",
    "unsealed": "magenta", "not-intact": "red", "unreadable": "red", "REGRESSION": "red"}
_SGR = {"green": "32", "red": "31", "yellow": "33", "cyan": "36", "magenta": "35"}
_WORD = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, STATUS_COLOURS)) + r")(?![\w-])")


COLOUR_WHENS = ("auto", "always", "never")
_colour = {"when": "auto"}  # the command line's `--color`, set once by `choose_colour`


def choose_colour(when: str) -> None:
    """Record the command line's `--color WHEN` for every painter of this process."""
    _colour["when"] = when if when in COLOUR_WHENS else "auto"


def colour_wanted(when: str | None = None, stream: io.TextIOBase | None = None,
                  environ: Mapping[str, str] = os.environ) -> bool:
    """Colour for `--color WHEN` (None: the command line's): `always` yes, `never` no,
    `auto` only on a terminal and only when NO_COLOR is unset or empty (no-color.org)."""
    when = _colour["when"] if when is None else when
    if when in ("always", "never"):
        return when == "always"
    return isatty(sys.stdout if stream is None else stream) and not environ.get("NO_COLOR")


def paint_statuses(line: str, colour: bool | None = None) -> str:
    """`line` with each whole status word in its colour (a word inside a name such as
    `refused-probe` is left alone); `line` itself without colour (None: `colour_wanted`)."""
    if not (colour_wanted() if colour is None else colour):
        return line
    return _WORD.sub(lambda m: f"\x1b[{_SGR[STATUS_COLOURS[m.group(1)]]}m{m.group(1)}\x1b[0m",
                     line)

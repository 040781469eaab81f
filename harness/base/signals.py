"""The one owner of stop signals: SIGTERM, SIGHUP and SIGINT become `Interrupted`.

Inside `signals_interrupt()` the first stop signal raises `Interrupted` in the main thread,
so the run stops its container, releases the lock and seals `interrupted`; a repeat does
not raise again (Slurm delivers one stop twice), a second Ctrl-C runs
`on_second_interrupt`. The state is the module's: a signal handler is process-wide.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

SIGINT_EXIT = 130
STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(BaseException):
    """Raised in the main thread by a stop signal: stop the container, seal."""


@dataclass
class _Stops:
    """What the stop handlers share, once per process (see the module's docstring)."""

    defer: bool = False  # inside `signals_deferred`: keep a signal pending, raise nothing
    pending: str | None = None  # a signal kept, not raised
    raised: bool = False  # this `signals_interrupt` scope raised already
    received: str | None = None  # the command's first stop signal: its exit code
    hurry: bool = False  # a second Ctrl-C came
    on_hurry: list[Callable[[], None]] = field(default_factory=list)


_STOPS = _Stops()


def _handler(signum: int, frame: object) -> None:
    name = signal.Signals(signum).name
    _STOPS.received = _STOPS.received or name
    if _STOPS.defer or _STOPS.raised:
        _STOPS.pending = name
        if signum == signal.SIGINT and _STOPS.raised:
            _hurry()
        return
    _STOPS.raised = True
    raise Interrupted(name)


def _hurry() -> None:
    _STOPS.hurry = True
    for action in list(_STOPS.on_hurry):
        action()


def _base_sigint(signum: int, frame: object) -> None:
    """Outside a run: Python's own KeyboardInterrupt, remembered for the exit code."""
    _STOPS.received = _STOPS.received or "SIGINT"
    raise KeyboardInterrupt


def install() -> None:
    """At a command's start: forget what an earlier command in this process received,
    and remember a Ctrl-C that lands outside any run (unless SIGINT is ignored)."""
    _STOPS.received = _STOPS.pending = None
    _STOPS.raised = _STOPS.hurry = False
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _base_sigint)


def received() -> str | None:
    """The first stop signal this command received, by name, or None."""
    return _STOPS.received


def exit_code(code: int) -> int:
    """The command's exit code, given what it received: 130 after a SIGINT."""
    return SIGINT_EXIT if received() == "SIGINT" else code


def _caught(sig: signal.Signals) -> bool:
    return not (sig == signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Turn SIGTERM, SIGHUP and SIGINT into `Interrupted` in the main thread for the
    duration. Only the first signal of the scope raises; a repeat is kept as pending (a
    repeated SIGINT also hurries, see `on_second_interrupt`)."""
    old = {s: signal.signal(s, _handler) for s in STOPS if _caught(s)}
    saved = _STOPS.raised, _STOPS.hurry
    _STOPS.raised = _STOPS.hurry = False
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _STOPS.raised, _STOPS.hurry = saved


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold signals while sealing; a signal that came meanwhile is kept (`pending_signal`)
    for the caller to act on once the seal is written."""
    _STOPS.defer, _STOPS.pending = True, None
    try:
        yield
    finally:
        _STOPS.defer = False


def pending_signal() -> str | None:
    return _STOPS.pending


@contextlib.contextmanager
def on_second_interrupt(action: Callable[[], None]) -> Iterator[None]:
    """While a stop waits (a container's stop grace), a second Ctrl-C runs `action` at
    once, in the signal handler: keep it short and non-blocking (start a thread). A
    second Ctrl-C that came before the wait began runs it on entry."""
    if _STOPS.hurry:
        action()
    _STOPS.on_hurry.append(action)
    try:
        yield
    finally:
        _STOPS.on_hurry.remove(action)

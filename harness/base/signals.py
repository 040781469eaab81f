"""The one owner of stop signals: SIGTERM, SIGHUP and SIGINT become `Interrupted`.

Inside `signals_interrupt()` (one run, one night) the first stop signal raises
`Interrupted` in the main thread, and the code it lands in stops the container, releases
the lock once the container is gone and seals the run `interrupted`. SIGHUP is SIGTERM's
twin: an ssh connection that drops must not leave a container running beside a free lock
and an unsealed folder. A hang-up the harness was started ignoring (`nohup`) stays
ignored: that is what the operator asked for.

A repeat does not raise again: under Slurm one stop arrives twice (scancel signals every
process of the job, and the job script forwards the TERM its shell got), and a second
`Interrupted` would cut short the container stop and the seal the first one started. A
second Ctrl-C is a person insisting, though: it runs what `on_second_interrupt` registered
(the container is killed at once instead of waiting out its stop grace); the seal still
happens and the lock is still released.

What the command received decides its exit code (`exit_code`): 130 after a SIGINT, the
shell's convention for Ctrl-C, whatever the interrupted run's status says; a SIGTERM or
SIGHUP leaves the code to the run's status (`interrupted` is exit 1).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

SIGINT_EXIT = 130
STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(BaseException):
    """Raised in the main thread by a stop signal: stop the container, seal."""


_state: dict = {"defer": False, "pending": None, "raised": False, "received": None,
                "hurry": False, "on_hurry": []}


def _handler(signum: int, frame: object) -> None:
    name = signal.Signals(signum).name
    _state["received"] = _state["received"] or name
    if _state["defer"] or _state["raised"]:
        _state["pending"] = name
        if signum == signal.SIGINT and _state["raised"]:
            _hurry()
        return
    _state["raised"] = True
    raise Interrupted(name)


def _hurry() -> None:
    _state["hurry"] = True
    for action in list(_state["on_hurry"]):
        action()


def _base_sigint(signum: int, frame: object) -> None:
    """Outside a run: Python's own KeyboardInterrupt, remembered for the exit code."""
    _state["received"] = _state["received"] or "SIGINT"
    raise KeyboardInterrupt


def install() -> None:
    """At a command's start: forget what an earlier command in this process received,
    and remember a Ctrl-C that lands outside any run (unless SIGINT is ignored)."""
    _state.update(received=None, pending=None, raised=False, hurry=False)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _base_sigint)


def received() -> str | None:
    """The first stop signal this command received, by name, or None."""
    return _state["received"]


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
    saved = _state["raised"], _state["hurry"]
    _state["raised"] = _state["hurry"] = False
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _state["raised"], _state["hurry"] = saved


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold signals while sealing; a signal that came meanwhile is re-raised afterwards."""
    _state["defer"], _state["pending"] = True, None
    try:
        yield
    finally:
        _state["defer"] = False


def pending_signal() -> str | None:
    return _state["pending"]


@contextlib.contextmanager
def on_second_interrupt(action: Callable[[], None]) -> Iterator[None]:
    """While a stop waits (a container's stop grace), a second Ctrl-C runs `action` at
    once, in the signal handler: keep it short and non-blocking (start a thread). A
    second Ctrl-C that came before the wait began runs it on entry."""
    if _state["hurry"]:
        action()
    _state["on_hurry"].append(action)
    try:
        yield
    finally:
        _state["on_hurry"].remove(action)

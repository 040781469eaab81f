"""Import what a run needs after its container while that container runs.

Why: a `harness run` of a short control is mostly start-up, and part of that start-up was
importing modules used only once the container has exited: the post-steps, the seal and
the performance log with its file lock (about 15 ms of a 250 ms start here). `start`,
called once the container has started, imports them in a background thread; the main
thread is then blocked on the engine (docker inspect waits for the start) or on the
launcher's exit, so that time overlaps docker's own instead of adding to it.

The thread only imports modules: it changes no state a run records, and an import that
fails in it is ignored there, so the main thread's own import raises it where it always
did. `wait` joins the thread before the main thread uses those modules, so no module is
ever imported by both threads at once. A module already loaded (the next control of a
night) starts no thread.
"""

from __future__ import annotations

import importlib
import sys
import threading

AFTER_CONTAINER = ("harness.pipeline.post", "harness.pipeline.finish")

_threads: list[threading.Thread] = []


def _load(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the main thread's own import says what is wrong, where it is used
            return


def start(modules: tuple[str, ...] = AFTER_CONTAINER) -> threading.Thread | None:
    """Import `modules` in a daemon thread; None when all are loaded already."""
    missing = tuple(m for m in modules if m not in sys.modules)
    if not missing:
        return None
    thread = threading.Thread(target=_load, args=(missing,), name="harness-warm", daemon=True)
    _threads.append(thread)
    thread.start()
    return thread


def wait() -> None:
    """Join every thread `start` began: afterwards only the main thread imports."""
    while _threads:
        _threads.pop().join()

"""Passive transition trace: which call, in which process, on which object changed the config.

The seed could not say which call appended the second "+sparse_attn_indexer". This module
wraps `VllmConfig.__post_init__` and the platform's `apply_config_platform_defaults` in
memory (no engine file is touched) and appends one JSON line per event to
`transitions.jsonl`:

  enter/exit  every call of a hooked function: pid, process, caller stack (file:line),
              id() of the config, and each watched field's value and object id before/after.
  change      a watched field whose value or object changed, attributed to the innermost
              hooked call that changed it, or (hook null) detected at a later checkpoint
              when something unhooked changed it.
  snapshot    the watched fields at a named checkpoint (start-up captured, generation, ...).
  error       the trace itself failed; the engine call still ran untouched.

Passive: the wrapped function gets the same arguments, its result and exceptions pass
through unchanged, and every failure of the trace is swallowed after being recorded.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import json
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

from .encode import canonical, encode
from .interface import TRANSITIONS
from .snapshot import resolve

WATCHED = ("compilation.custom_ops", "compilation.mode")
# How many times a config went through `__post_init__`, kept on the config itself so that
# the count travels with it when vLLM pickles it into the engine core or a worker: the
# engine core's first post-init of the config it received is that config's second.
ORDINAL = "_harness_observer_post_inits"
FILE = TRANSITIONS
MARK = "__harness_observer_wrapped__"
HERE = os.path.dirname(os.path.abspath(__file__))
STACK_LIMIT = 40


def caller_stack() -> list[str]:
    """`file:line function` of each caller frame, outermost first, without this package."""
    frames = traceback.extract_stack(limit=STACK_LIMIT)
    return [f"{f.filename}:{f.lineno} {f.name}" for f in frames
            if not os.path.abspath(f.filename).startswith(HERE + os.sep)]


class Tracer:
    """Appends trace records for one process; `seen` remembers the last watched state."""

    def __init__(self, directory: str, watched: tuple[str, ...] = WATCHED) -> None:
        self.path = os.path.join(directory, FILE)
        self.watched = watched
        self.pid = os.getpid()
        self.seen: dict[tuple[int, str], tuple[str, int | None]] = {}
        self.calls = itertools.count(1)

    def emit(self, record: dict[str, Any]) -> None:
        if os.getpid() != self.pid:  # forked child: the parent's memory is not ours
            self.pid, self.seen = os.getpid(), {}
        record = {"pid": self.pid, "process": multiprocessing.current_process().name,
                  "time": time.time(), **record}
        line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)  # one write per line: lines of several processes never mix
        finally:
            os.close(fd)

    def state(self, config: Any) -> dict[str, dict[str, Any]]:
        out = {}
        for field in self.watched:
            try:
                obj = resolve(config, field)
                out[field] = {"value": encode(obj), "id": id(obj)}
            except Exception as e:
                out[field] = {"error": f"{type(e).__name__}: {e}", "id": None}
        return out

    def changes(self, config: Any, state: dict, hook: str | None, call: int | None,
                stack: list[str], detected_at: str) -> None:
        """Emit a `change` per watched field that differs from what was last seen."""
        for field, now in state.items():
            key = (id(config), field)
            current = (canonical(now.get("value", now.get("error"))), now["id"])
            previous = self.seen.get(key)
            self.seen[key] = current
            if previous is None or previous == current:
                continue
            self.emit({"event": "change", "field": field, "hook": hook, "call": call,
                       "detected_at": detected_at, "config_id": id(config),
                       "before": json.loads(previous[0]), "id_before": previous[1],
                       "after": now.get("value"), "id_after": now["id"], "stack": stack})

    def checkpoint(self, config: Any, label: str) -> None:
        """Record the watched fields at a named point (and any unhooked change before it)."""
        try:
            stack = caller_stack()
            state = self.state(config)
            self.changes(config, state, None, None, stack, label)
            self.emit({"event": "snapshot", "label": label, "config_id": id(config),
                       "watched": state, "stack": stack})
        except Exception as e:
            self.error(f"checkpoint {label}", e)

    def error(self, where: str, exc: BaseException) -> None:
        with contextlib.suppress(Exception):  # nowhere left to say it; the engine must not notice
            self.emit({"event": "error", "where": where,
                       "message": f"{type(exc).__name__}: {exc}"})

    def wrap(self, func: Callable, hook: str, config_of: Callable[..., Any],
             counted: bool = False) -> Callable:
        """A pass-through wrapper of `func` that records enter, exit and changes; `counted`
        numbers each call on the config it is given (ORDINAL), across processes."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = self._enter(hook, config_of, args, kwargs, counted)
            try:
                result = func(*args, **kwargs)
            except BaseException as e:
                self._exit(started, f"{type(e).__name__}: {e}")
                raise
            self._exit(started, None)
            return result

        setattr(wrapper, MARK, True)
        return wrapper

    def _enter(self, hook: str, config_of: Callable, args: tuple, kwargs: dict,
               counted: bool = False) -> tuple | None:
        try:
            config = config_of(*args, **kwargs)
            call = next(self.calls)
            stack = caller_stack()
            before = self.state(config)
            self.changes(config, before, None, None, stack, f"enter {hook}")
            record = {"event": "enter", "hook": hook, "call": call, "config_id": id(config),
                      "watched": before, "stack": stack}
            if counted:
                record["ordinal"] = _count(config)
            self.emit(record)
            return (hook, call, config, before, stack)
        except Exception as e:
            self.error(f"enter {hook}", e)
            return None

    def _exit(self, started: tuple | None, raised: str | None) -> None:
        if started is None:
            return
        hook, call, config, before, stack = started
        try:
            after = self.state(config)
            self.changes(config, after, hook, call, stack, f"exit {hook}")
            self.emit({"event": "exit", "hook": hook, "call": call, "config_id": id(config),
                       "before": before, "after": after, "raised": raised, "stack": stack})
        except Exception as e:
            self.error(f"exit {hook}", e)


def _count(config: Any) -> int | None:
    """One more post-init of this config object; its number (None if it takes no mark)."""
    try:
        ordinal = int(getattr(config, ORDINAL, 0)) + 1
        object.__setattr__(config, ORDINAL, ordinal)
        return ordinal
    except Exception:
        return None


def _config_arg(*args: Any, **kwargs: Any) -> Any:
    """The config of `apply_config_platform_defaults(vllm_config)` (after cls, if bound)."""
    if "vllm_config" in kwargs:
        return kwargs["vllm_config"]
    return args[-1]


def wrap_method(owner: type, name: str, tracer: Tracer, hook: str,
                config_of: Callable[..., Any], counted: bool = False) -> bool:
    """Replace `owner.name` by a traced pass-through; keep classmethod/staticmethod kind.
    Returns False when it was already wrapped (plugins may load more than once)."""
    raw = inspect.getattr_static(owner, name)
    kind = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
    func = raw.__func__ if kind else raw
    if getattr(func, MARK, False):
        return False
    wrapped = tracer.wrap(func, hook, config_of, counted)
    setattr(owner, name, kind(wrapped) if kind else wrapped)
    return True


_TRACER: Tracer | None = None


def tracer() -> Tracer | None:
    """This process's tracer, once `install` ran."""
    return _TRACER


def install(directory: str) -> Tracer:
    """Hook the engine's config post-init and the platform defaults hook (idempotent)."""
    global _TRACER
    if _TRACER is None:
        _TRACER = Tracer(directory)
    from vllm.config import VllmConfig
    from vllm.platforms import current_platform

    wrap_method(VllmConfig, "__post_init__", _TRACER, "VllmConfig.__post_init__",
                lambda self, *a, **k: self, counted=True)
    platform = type(current_platform)
    wrap_method(platform, "apply_config_platform_defaults", _TRACER,
                f"{platform.__name__}.apply_config_platform_defaults", _config_arg)
    return _TRACER

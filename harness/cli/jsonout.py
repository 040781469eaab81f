"""`--json` on verify, check, images verify and bundle verify: one JSON object on stdout.

A script that asked for JSON gets JSON whatever happened, with the same exit code the
plain form gives: the object's `exit_code` says it, and `error` (with `faults` and `rule`)
replaces the message the plain form prints on stderr when the input is bad or the host is
unfit. Strings go out with `ensure_ascii`, so a hostile name cannot reach a terminal raw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from harness.base.errors import HarnessError, InvalidInput
from harness.base.iofault import io_fault_anywhere


def emit(doc: dict[str, Any]) -> None:
    """The one line a --json command prints."""
    click.echo(json.dumps(doc, sort_keys=True, ensure_ascii=True, default=str))


def fault_doc(error: HarnessError) -> dict[str, Any]:
    """What the plain form would say on stderr, as fields."""
    return {"ok": False, "exit_code": error.code, "error": error.message, "rule": error.rule,
            "faults": list(error.faults) if isinstance(error, InvalidInput) else []}


@contextmanager
def as_json_errors(enabled: bool, **context: Any) -> Iterator[None]:
    """With --json, turn a harness error (or a refused read or write) into the one JSON
    object and its exit code; without, let it reach `main` as usual."""
    try:
        yield
    except HarnessError as e:
        if not enabled:
            raise
        emit({**context, **fault_doc(e)})
        raise click.exceptions.Exit(e.code) from None
    except OSError as e:
        if not enabled:
            raise
        emit({**context, **fault_doc(io_fault_anywhere(e))})
        raise click.exceptions.Exit(io_fault_anywhere(e).code) from None

"""`--json` on the commands that report a result (verify, check, gates, approve, schedule,
bundle export and verify, run, night, rerun, ...): one JSON object on stdout.

A script that asked for JSON gets JSON whatever happened, with the same exit code the
plain form gives: the object's `exit_code` says it, and `error` (with `faults` and `rule`)
replaces the message the plain form prints on stderr when the input is bad or the host is
unfit. Strings go out with `ensure_ascii`, so a hostile name cannot reach a terminal raw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from harness.base.errors import HarnessError, InvalidInput
from harness.base.iofault import as_fault


def json_option(fields: str) -> Any:
    """The one `--json` flag of a command whose object has `fields`."""
    return click.option("--json", "as_json", is_flag=True,
                        help=f"one JSON object on stdout: {fields} (or error)")


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
    except (HarnessError, OSError) as e:
        if not enabled:
            raise
        fault = as_fault(e)
        emit({**context, **fault_doc(fault)})
        raise click.exceptions.Exit(fault.code) from None


class Said:
    """What run, night and rerun say as they end. Plain: lines on stdout. With --json the
    same facts become one object at the end (`runs`, `not_executed`, the command's own
    fields, `exit_code`) and the lines go to stderr, so a script reads nothing but JSON."""

    def __init__(self, as_json: bool, **context: Any) -> None:
        self.as_json = as_json
        self.doc: dict[str, Any] = {**context, "runs": [], "not_executed": []}

    def line(self, text: str) -> None:
        click.echo(text, err=self.as_json)

    def run(self, status: str, run_dir: Path, text: str) -> None:
        """One sealed run: `text` is its plain line."""
        self.doc["runs"].append({"status": str(status), "run_id": Path(run_dir).name,
                                 "path": str(run_dir)})
        self.line(text)

    def unrun(self, control: str, why: str, text: str) -> None:
        """A slot the stop left unrun: `text` is its plain line."""
        self.doc["not_executed"].append({"control": control, "why": why})
        self.line(text)

    def end(self, code: int, **facts: Any) -> int:
        """The object, with --json; `code` back for the command's exit."""
        if self.as_json:
            emit({**self.doc, **facts, "ok": code == 0, "exit_code": code})
        return code

"""How the doctor's lines are shown: a rich table on a terminal, plain lines in logs, or JSON."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.base.atomic import dumps_json
from harness.judge.doctor.checks import Check, any_failed

SCHEMA = "harness.doctor/v1"
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def as_document(checks: Sequence[Check]) -> dict[str, Any]:
    """The --json form; `ok` is False exactly when the command exits 1."""
    return {"schema": SCHEMA, "ok": not any_failed(checks), "checks": [asdict(c) for c in checks]}


def render_json(checks: Sequence[Check]) -> str:
    return dumps_json(as_document(checks))


def summary(checks: Sequence[Check]) -> str:
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail", "skip")}
    verdict = "host NOT ready" if counts["fail"] else "host ready"
    skipped = f", {counts['skip']} skipped" if counts["skip"] else ""
    return f"{verdict}: {counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail{skipped}"


def render_plain(checks: Sequence[Check]) -> str:
    """One line per check, grep-able: `STATUS  NAME  detail`."""
    width = max((len(c.name) for c in checks), default=0)
    lines = [f"{c.status:<4}  {c.name:<{width}}  {c.detail}" for c in checks]
    return "\n".join([*lines, summary(checks)]) + "\n"


def render_table(checks: Sequence[Check], width: int = 120) -> str:
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for c in checks:
        table.add_row(f"[{_STYLE[c.status]}]{c.status}[/]", c.name, c.detail)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width)
    console.print(table)
    console.print(summary(checks), style="bold red" if any_failed(checks) else "bold green")
    return buf.getvalue()

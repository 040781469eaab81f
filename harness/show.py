"""A readable summary of one run folder, for a person at a terminal."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.rerun import reruns_of

STATUS_STYLE = {"accepted": "green", "refused": "red", "failed": "red",
                "timed-out": "yellow", "interrupted": "yellow"}


def render_run(run_dir: Path, record: dict, console: Console | None = None) -> None:
    console = console or Console()
    status = record.get("status", "?")
    console.print(f"[bold]{record.get('run_id')}[/bold]  "
                  f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]", highlight=False)
    t = Table(show_header=False, box=None, pad_edge=False)
    camp = record.get("campaign") or {}
    lock = record.get("lock") or {}
    out = record.get("outcome") or {}
    rows = [
        ("campaign", f"{camp.get('name')} (row {camp.get('row')})"),
        ("control", (record.get("control") or {}).get("name")),
        ("image", (record.get("image") or {}).get("id")),
        ("seal", record.get("seal")),
        ("exit code", out.get("exit_code")),
        ("duration", f"{out.get('duration_s')} s"),
        ("lock", (f"{lock.get('path')}: acquired {lock.get('acquired')}, released "
                  f"{lock.get('released')} (waited {lock.get('wait_s')} s)")
         if lock else "not taken"),
    ]
    for p in record.get("post_steps") or []:
        rows.append((f"post-step {p['name']}", f"{p.get('verdict')} (exit {p.get('exit_code')})"))
    if record.get("rerun_of"):
        r = record["rerun_of"]
        rows.append(("rerun of", f"{r.get('run_id')}: {r.get('reason')}"))
    for r in reruns_of(run_dir):
        rows.append(("rerun by", f"{r['run_id']} ({r.get('status')}): {r.get('reason')}"))
    for k, v in rows:
        t.add_row(f"[dim]{k}[/dim]", str(v))
    console.print(t)
    for r in record.get("reasons") or []:
        console.print(f"  [red]•[/red] {escape(str(r))}", highlight=False)
    recovered = run_dir / "recovered.json"
    if recovered.is_file():
        console.print(f"  [yellow]recovered:[/yellow] {escape(recovered.read_text().strip())}",
                      highlight=False)
    addenda = sorted(p.name for p in (run_dir / "addenda").iterdir()) \
        if (run_dir / "addenda").is_dir() else []
    for a in addenda:
        console.print(f"  addendum: {a}", markup=False)

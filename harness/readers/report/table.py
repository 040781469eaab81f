"""The morning summary as a terminal reads it: fixed columns like `sacct`, then what to do.

Each column has a bounded width so a hostile or long value cannot push the table apart;
values arrive inert (summary built them), here they are only cut. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.states import Status
from harness.readers.report.format import figure_text
from harness.readers.report.inert import inert
from harness.readers.report.runline import links, status_field
from harness.readers.report.steps import gate0_lines, shell_arg
from harness.readers.report.summary import counts_text, link_text, status_text
from harness.readers.report.unrun import not_executed_lines

MIN_WIDTH, MAX_WIDTH = 60, 200
NOTE_MIN = 12
DETAIL_CHARS = 400  # a detail line (a reason, a Gate-0 value) is cut past this
# (heading, width, right-aligned); the note column takes the width that is left
# STATUS fits `(interrupted)`, a superseded attempt's longest status
COLUMNS = (("#", 3, True), ("CONTROL", 22, False), ("ATT", 3, True), ("STATUS", 13, False),
           ("DURATION", 8, True), ("LOCK WAIT", 9, True), ("EXIT", 4, True))
KV = ("KV CACHE", 10, True)
CONTROL_MIN = 12  # CONTROL gives up width to the note down to this on a narrow terminal


def cut(text: Any, width: int) -> str:
    """`text` in at most `width` characters, `…` where it was cut."""
    value = inert(text, 4 * MAX_WIDTH) if not isinstance(text, str) else text
    return value if len(value) <= width else value[: max(width - 1, 0)] + "…"


def _cell(text: Any, width: int, right: bool) -> str:
    value = cut("" if text is None else str(text), width)
    return value.rjust(width) if right else value.ljust(width)


def _note(e: Mapping[str, Any]) -> str:
    """What replaced the attempt, else why it did not pass, else its rerun links."""
    return (links(superseded_by=e.get("superseded_by")) or "; ".join(e.get("reasons") or [])
            or link_text(e))


def _values(e: Mapping[str, Any], kv: bool) -> list[Any]:
    values = [e.get("number"), e["control"], e["attempt"] or "",
              status_field(e["status"], e.get("superseded_by")),
              figure_text("duration_s", e.get("duration_s")),
              figure_text("lock_wait_s", e.get("lock_wait_s")),
              figure_text("exit_code", e.get("exit_code"))]
    if kv:
        values.append(figure_text("kv_cache_gib", e["metrics"].get("kv_cache_gib")))
    return values


def _layout(width: int, kv: bool, longest: int) -> tuple[list[tuple[str, int, bool]], int]:
    """The columns and the note's width for a `width`-character line."""
    columns = [*COLUMNS, KV] if kv else list(COLUMNS)
    name, control, right = columns[1]
    control = min(control, max(longest, len(name), CONTROL_MIN))
    used = sum(w for _, w, _ in columns) + 2 * len(columns) - (columns[1][1] - control)
    short = max(NOTE_MIN - (width - used), 0)
    columns[1] = (name, max(control - short, CONTROL_MIN), right)
    used -= control - columns[1][1]
    return columns, max(width - used, NOTE_MIN)


def table_lines(runs: Sequence[Mapping[str, Any]], width: int) -> list[str]:
    """The fixed-column table: `width` characters at most per line (clamped to MIN_WIDTH..
    MAX_WIDTH), or the narrowest the columns allow (78 characters, 90 with the KV cache)."""
    width = min(max(width, MIN_WIDTH), MAX_WIDTH)
    kv = any(e["metrics"].get("kv_cache_gib") is not None for e in runs)
    columns, note = _layout(width, kv, max((len(str(e["control"])) for e in runs), default=0))
    head = "  ".join(_cell(h, w, r) for h, w, r in columns) + "  NOTE"
    out = [head.rstrip()]
    for e in runs:
        cells = [_cell(v, w, r) for v, (_, w, r) in zip(_values(e, kv), columns, strict=True)]
        out.append(("  ".join(cells) + "  " + cut(_note(e), note)).rstrip())
    return out


def _detail(e: Mapping[str, Any]) -> list[str]:
    """A row that did not end accepted, in full: reasons, Gate 0, links, commands."""
    head = (f"row {e.get('number')}: {e['control']} attempt {e['attempt'] or '?'}, "
            f"{status_text(e)}")
    lines = [cut(head, DETAIL_CHARS)]
    if e.get("superseded_by"):  # replaced: only how to compare it with what replaced it
        return lines + [f"  next: {cmd}" for cmd in e.get("next", [])]
    lines += [f"  {cut(r, DETAIL_CHARS)}" for r in e.get("reasons", [])]
    lines += [f"  Gate 0 {cut(g, DETAIL_CHARS)}" for g in gate0_lines(e.get("gate0") or [])]
    if e.get("run_id"):
        lines.append(f"  run: {e['path'] or e['run_dir'] or e['run_id']}")
    lines += [f"  next: {cmd}" for cmd in e.get("next", [])]
    return lines


def render_table(summary: Mapping[str, Any], width: int = 100) -> str:
    """The whole terminal form: the night, its headline, the table, the rows to act on."""
    night = summary["night"]
    title = f"Night {night.get('name') or '?'}"
    if night.get("campaign"):
        title += f" ({night['campaign']})"
    lines = [cut(title, MAX_WIDTH), cut(summary.get("headline") or "", MAX_WIDTH),
             cut(f"attempts: {counts_text(summary)}", MAX_WIDTH), ""]
    lines += table_lines(summary["runs"], width)
    if left := not_executed_lines(summary):
        lines += ["", "not executed:", *(cut(f"  {line}", MAX_WIDTH) for line in left)]
    todo = [e for e in summary["runs"] if e["status"] != Status.ACCEPTED]
    for e in todo:
        lines += ["", *_detail(e)]
    where = shell_arg(night["dir"]) if night.get("dir") else "NIGHT_DIR"
    lines += ["", f"full report: harness report {where} --format md (or -o FILE.html)"]
    return "\n".join(lines) + "\n"

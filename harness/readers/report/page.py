"""The morning summary as one self-contained HTML page: inline CSS and SVG, no scripts, no
external loads, readable from 800 px up (rows become cards below 760 px, long ids wrap).

Status keeps its colour but always says itself in words, with a symbol, for readers who
do not see the colour."""

from __future__ import annotations

import html
import os
import re
from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from harness.base.states import State
from harness.config.references import TELEMETRY_FIGURES
from harness.measure import perflog
from harness.measure.runfolder import layout
from harness.readers.report.format import MIB, figure_text
from harness.readers.report.inert import inert
from harness.readers.report.regressions import regression_lines
from harness.readers.report.steps import gate0_lines, shell_arg
from harness.readers.report.summary import (
    LABELS,
    SHOWN_METRICS,
    TIME_FIGURES,
    UNCAPPED,
    counts_text,
    figure_value,
    kernel_heading,
    link_text,
    night_facts,
    reference_note,
    shown_metrics,
    shown_telemetry,
)
from harness.readers.report.unrun import not_executed_lines

SYMBOLS = {State.ACCEPTED: "✓", State.REFUSED: "✗", State.FAILED: "!", State.TIMED_OUT: "⏱",
           State.INTERRUPTED: "■", State.DEFERRED: "…"}
_STAMP = re.compile(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z$")

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:1rem auto;padding:0 1rem;max-width:1400px;
color:#222;background:#fafafa;overflow-wrap:break-word}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;background:#fff;font-size:.85rem;width:100%}
th,td{border:1px solid #ddd;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.name{white-space:nowrap}
.status{font-weight:600;padding:.1rem .4rem;border-radius:.3rem;white-space:nowrap}
.accepted{background:#d7f5dd;color:#135d22}.refused{background:#fde0e0;color:#8a1111}
.failed,.timed-out{background:#fde9d7;color:#7a410c}
.interrupted,.deferred,.planned,.running,.unknown{background:#eee;color:#444}
.meta{color:#555;font-size:.8rem}.links a{margin-right:.6rem}
dl.figs{margin:0;display:grid;grid-template-columns:auto auto;gap:0 .5rem;justify-content:start}
dl.figs dt{color:#555;white-space:nowrap}
dl.figs dd{margin:0;font-variant-numeric:tabular-nums;white-space:nowrap}
.ref{font-size:.75rem;display:block;white-space:normal}
.ref.outside{color:#8a1111;font-weight:600}.ref.within{color:#135d22}
code{font-size:.78rem;word-break:break-all}
p.headline{font-size:1.1rem;font-weight:600}
tr.superseded td{color:#888;background:#f4f4f4}
tr.superseded .status{background:#e6e6e6;color:#777;font-weight:400}
.gate0{font-size:.8rem}.next code{display:block;margin:.15rem 0}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,600px),1fr));
gap:.75rem}
figure{margin:0;background:#fff;border:1px solid #ddd;padding:.5rem;min-width:0}
figure svg{max-width:100%;height:auto;display:block}
figcaption{font-size:.8rem;color:#555}
.kernel{margin:.4rem 0}.kernel code{display:block;white-space:pre-wrap;margin:.1rem 0}
@media (max-width:900px){
table,thead,tbody,tr,td{display:block;width:100%}thead{display:none}
tr{border:1px solid #ccc;margin-bottom:.6rem;background:#fff}
td{border:none;border-bottom:1px solid #eee}td.num{text-align:left}
td[data-label]::before{content:attr(data-label) ": ";font-weight:600;color:#555}}
"""


def _h(text: Any) -> str:
    return html.escape(inert(text, UNCAPPED), quote=True)


def night_labels(names: Sequence[str]) -> list[str]:
    """`11-30 02:15` from each night folder's UTC stamp."""
    def label(name: str, seconds: bool) -> str:
        m = _STAMP.search(name)
        if not m:
            return inert(name, 24)
        return f"{m[2]}-{m[3]} {m[4]}:{m[5]}" + (f":{m[6]}" if seconds else "")

    short = [label(n, False) for n in names]
    return short if len(set(short)) == len(short) else [label(n, True) for n in names]


def _href(path: str | None, night_dir: str | None, *parts: str) -> str | None:
    """A link to a file of the run, relative to the night folder (where summary.html is)."""
    if not path:
        return None
    target = os.path.join(path, *parts)
    if night_dir and os.path.isabs(path):
        target = os.path.relpath(target, os.path.abspath(night_dir))
    return quote(target)


def _links(e: Mapping[str, Any], night_dir: str | None) -> str:
    links = [("run folder", ()), ("run.json", (layout.RECORD,)),
             ("stdout log", (layout.LOGS, layout.STDOUT_LOG)),
             ("stderr log", (layout.LOGS, layout.STDERR_LOG))]
    out = [f'<a href="{_h(href)}">{_h(text)}</a>' for text, parts in links
           if (href := _href(e["path"], night_dir, *parts)) is not None]
    if not out:
        return ""
    show = f"<code>harness show {_h(shell_arg(e['path']))}</code>"
    return f'<div class="meta links">{"".join(out)}</div><div class="meta">{show}</div>'


def _figures_cell(e: Mapping[str, Any], names: Sequence[str]) -> str:
    rows = []
    for name in names:
        value = figure_value(e, name)
        note = reference_note(e, name)
        mark = ""
        if note:
            kind = "within" if note.startswith("within") else "outside"
            mark = f'<span class="ref {kind}">{"✓" if kind == "within" else "⚠"} {_h(note)}</span>'
        rows.append(f"<dt>{_h(LABELS[name])}</dt><dd>{_h(figure_text(name, value))}{mark}</dd>")
    return f'<dl class="figs">{"".join(rows)}</dl>' if rows else "—"


def _notes(e: Mapping[str, Any]) -> str:
    """Reasons, rerun links, a superseded attempt's successor, Gate-0 values, commands."""
    out = "".join(f"<div>{_h(r)}</div>" for r in e["reasons"])
    if link := link_text(e):
        out += f'<div class="meta">{_h(link)}</div>'
    if e.get("superseded_by"):
        out += f'<div class="meta">superseded by <code>{_h(e["superseded_by"])}</code></div>'
    out += "".join(f'<div class="gate0">Gate 0 {_h(line)}</div>'
                   for line in gate0_lines(e.get("gate0") or []))
    if e.get("next"):
        out += '<div class="meta next">next:' + "".join(
            f"<code>{_h(cmd)}</code>" for cmd in e["next"]) + "</div>"
    return out


def _row(e: Mapping[str, Any], metrics: Sequence[str], telemetry: Sequence[str],
         night_dir: str | None) -> str:
    status = str(e["status"])
    css = status if status.replace("-", "").isalpha() else "unknown"
    reasons = _notes(e)
    if e["run_id"]:
        reasons += f'<div class="meta"><code>{_h(e["run_id"])}</code></div>'
    if e.get("git"):
        reasons += f'<div class="meta">git {_h(e["git"])}</div>'
    reasons += _links(e, night_dir)
    attempt = f'<div class="meta">attempt {_h(e["attempt"])}</div>' if e["attempt"] else ""
    symbol = SYMBOLS.get(status, "•")
    shown = f"{status} (superseded)" if e.get("superseded_by") else status
    number = e.get("number")
    cells = [
        f'<td class="num" data-label="#">{_h(number if number is not None else "")}</td>',
        f'<td class="name" data-label="control">{_h(e["control"])}{attempt}</td>',
        f'<td data-label="status"><span class="status {_h(css)}">{symbol} {_h(shown)}</span>'
        "</td>",
        f'<td data-label="reasons and links">{reasons or "—"}</td>',
        f'<td data-label="times">{_figures_cell(e, TIME_FIGURES)}</td>',
    ]
    if metrics:
        cells.append(f'<td data-label="vLLM">{_figures_cell(e, metrics)}</td>')
    if telemetry:
        cells.append(f'<td data-label="telemetry">{_figures_cell(e, telemetry)}</td>')
    row_class = ' class="superseded"' if e.get("superseded_by") else ""
    return f"<tr{row_class}>" + "".join(cells) + "</tr>"


def _kernel(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each fault a run's kernel-log window showed, with its first lines."""
    out = []
    for e in runs:
        for fault in e.get("kernel") or []:
            lines = "".join(f"<code>{_h(line)}</code>" for line in fault["lines"])
            out.append(f'<div class="kernel"><div>{_h(kernel_heading(e, fault))}</div>'
                       f"{lines}</div>")
    return ["<h2>Kernel log</h2>", *out] if out else []


def _run_plots(runs: Sequence[Mapping[str, Any]], left_out: Any) -> list[str]:
    from harness.readers.report.runplots import telemetry_svg

    out = []
    for i, e in enumerate(runs):
        if not e.get("series") or e.get("superseded_by"):
            continue
        title = f"row {e.get('number')}, {e['control']} attempt {e['attempt'] or '?'}"
        svg = telemetry_svg(e["series"], f"t{i}", title)
        if svg:
            out.append(f"<figure>{svg}<figcaption>{_h(title)}: {_h(e['run_id'] or '')}"
                       "</figcaption></figure>")
    if not out:
        return []
    more = left_out if isinstance(left_out, int) and not isinstance(left_out, bool) else 0
    rest = [f'<p class="meta">and {more} more sampled runs: each keeps its samples in '
            f"{_h(layout.TELEMETRY)}</p>"] if more > 0 else []
    return ["<h2>Telemetry per run</h2>", '<div class="plots">', *out, "</div>", *rest]


def _plots(summary: Mapping[str, Any]) -> list[str]:
    from harness.readers.report.plots import render_plots

    trends = summary["trends"]
    if not trends:
        return []
    names = [name for name, _ in next(iter(trends.values()))]
    series = {c: [_in_shown_units(values) for _, values in pts] for c, pts in trends.items()}
    shown = [(m, LABELS[m], _unit(m)) for m in ("duration_s", "lock_wait_s", *SHOWN_METRICS,
                                                 *TELEMETRY_FIGURES)]
    plots = render_plots(night_labels(names), series, shown)
    out = [f"<h2>Across nights ({len(names)} night{'s' if len(names) != 1 else ''})</h2>",
           '<div class="plots">']
    for title, svg in plots:
        out.append(f"<figure>{svg}<figcaption>{_h(title)}</figcaption></figure>")
    return [*out, "</div>"]


def _unit(name: str) -> str:
    return "MiB" if perflog.unit(name) == "B" else perflog.unit(name)


def _in_shown_units(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A night's trend values with bytes as MiB, as `_unit` labels them: the values
    themselves where none is in bytes, else only those in front of them (a year of nights is
    never copied whole)."""
    scaled = {k: v / MIB for k in _BYTES
              if isinstance(v := values.get(k), int | float) and not isinstance(v, bool)}
    return ChainMap(scaled, values) if scaled else values


_BYTES = {name for name in LABELS if perflog.unit(name) == "B"}  # the figures shown as MiB


def render_html(summary: Mapping[str, Any]) -> str:
    """A single self-contained page: inline CSS and SVG, no scripts, no external assets."""
    night = summary["night"]
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Night {_h(night.get('name', '?'))}</title>", f"<style>{_CSS}</style>",
        "</head><body>", f"<h1>Night {_h(night.get('name', '?'))}</h1>",
    ]
    if summary.get("headline"):
        out.append(f'<p class="headline">{_h(summary["headline"])}</p>')
    out.append('<ul class="meta">')
    out += [f"<li>{_h(label)}: <code>{_h(value)}</code></li>"
            for label, value in night_facts(night)]
    out += [f"<li>attempts: {_h(counts_text(summary))}</li>", "</ul>"]
    # confirmed regressions first (the only alerts), then what a stopped walk left, and why
    for title, lines in (("Regressions", regression_lines(summary)),
                         ("Not executed", not_executed_lines(summary))):
        if lines:
            out += [f"<h2>{title}</h2>", "<ul>", *(f"<li>{_h(x)}</li>" for x in lines), "</ul>"]
    metrics, telemetry = shown_metrics(summary["runs"]), shown_telemetry(summary["runs"])
    head = ["#", "control", "status", "reasons and links", "times"]
    head += (["vLLM"] if metrics else []) + (["telemetry"] if telemetry else [])
    out.append("<table><thead><tr>" + "".join(f"<th>{_h(c)}</th>" for c in head)
               + "</tr></thead><tbody>")
    out += [_row(e, metrics, telemetry, night.get("dir")) for e in summary["runs"]]
    out.append("</tbody></table>")
    out += _kernel(summary["runs"])
    out += _run_plots(summary["runs"], summary.get("plots_left_out"))
    out += _plots(summary)
    out.append("</body></html>")
    return "\n".join(out) + "\n"

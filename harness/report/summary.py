"""The morning summary of a night: one entry per run, as JSON, Markdown and self-contained HTML.

Everything here is pure: the caller gathers the journal rows, each run's `run.json` and
`metrics.json` (see harness.report.nights) and gets text back. Evidence files are read as
untrusted input: a missing or odd field shows as "—", never as a crash, and every string
is escaped for the format it lands in.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from harness.metrics import METRICS, UNITS
from harness.report.gitline import git_line
from harness.report.inert import inert
from harness.report.svg import fmt, line_plot
from harness.runfolder.layout import RECORD
from harness.runfolder.record import provenance_of, reason_of, reason_text

SCHEMA = "harness.summary/v1"
UNCAPPED = 10**9  # the renderers only escape; the length was capped when the entry was built
MAX_INT = 10**18  # larger "metrics" are not figures: float() of them could overflow
# Night-level trend: per control, a list of (night name, {metric: value}).
Trends = Mapping[str, Sequence[tuple[str, Mapping[str, float | int | None]]]]
SHOWN_METRICS = (
    "kv_cache_gib", "kv_tokens", "model_load_gib", "model_load_s",
    "graph_capture_gib", "graph_capture_s", "engine_init_s",
)
LABELS = {
    "kv_cache_gib": "KV cache", "kv_tokens": "KV tokens", "max_concurrency": "max concurrency",
    "max_model_len": "max model len", "model_load_gib": "model load",
    "model_load_s": "model load time", "graph_capture_gib": "graph capture",
    "graph_capture_s": "graph capture time", "engine_init_s": "engine init",
    "compilation_s": "compilation",
}


def _time(value: Any) -> datetime | None:
    """An ISO time; a naive one is taken as UTC (the harness writes UTC), so naive and aware
    times from a hand-edited or foreign run.json still subtract instead of raising."""
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _seconds(start: Any, end: Any) -> float | None:
    a, b = _time(start), _time(end)
    return round((b - a).total_seconds(), 3) if a and b else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _number(value: Any) -> float | int | None:
    """A finite number of sane size, or None: Infinity, NaN and 1e999 (which JSON readers
    accept) are never plotted, printed as figures, or written (allow_nan=False)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return value if abs(value) <= MAX_INT else None
    return value if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) \
        and abs(value) <= MAX_INT else None


def _text(value: Any) -> str | None:
    """A string field as inert text; None when absent. A non-string (an object where a
    name belongs) is shown as its JSON, so it is visible rather than silently dropped."""
    if value is None or value == "":
        return None
    return inert(value)


def run_entry(record: Mapping[str, Any], links: Mapping[int, str] | None = None) -> dict:
    """One summary row from {"row": journal row, "run": run.json, "metrics": metrics.json}.

    Every field is normalised to its type (inert text, a finite number, or None), so a
    hostile run.json can change what a row says but not whether the report renders."""
    row, run = _dict(record.get("row")), _dict(record.get("run"))
    metrics_doc = _dict(record.get("metrics"))
    metrics = _dict(metrics_doc.get("metrics", metrics_doc))
    times, lock = _dict(run.get("times")), _dict(run.get("lock"))
    raw_reasons = run.get("reasons")
    reasons = [inert(reason_text(reason_of(r))) for r in _list(raw_reasons) if r]
    if raw_reasons is not None and not isinstance(raw_reasons, list):
        reasons.append(f"{RECORD}: reasons is not a list: " + inert(raw_reasons, 200))
    # the journal's reason is usually the run's own reasons joined: show it only when new
    journal_reason = _text(row.get("reason"))
    if journal_reason and journal_reason not in reasons and journal_reason != "; ".join(reasons):
        reasons.append(journal_reason)
    reasons += [inert(p) for p in _list(record.get("problems"))]
    status = run.get("status")
    if status is not None and not isinstance(status, str):
        reasons.append(f"{RECORD}: status is not a string: " + inert(status, 200))
        status = None
    rerun = _dict(run.get("rerun_of"))
    link = row.get("rerun_of")
    linked = (links or {}).get(link) if isinstance(link, int) else None
    provenance = provenance_of(run.get("provenance"))
    return {
        "plan_index": _int(row.get("plan_index")),
        "control": _text(row.get("control")) or _text(_dict(run.get("control")).get("name"))
        or "?",
        "attempt": _int(row.get("attempt")),
        "origin": _text(row.get("origin")),
        "state": _text(row.get("state")),
        "status": _text(status) or _text(row.get("state")) or "unknown",
        "run_id": _text(run.get("run_id")) or _text(row.get("run_id")),
        "run_dir": _text(row.get("run_dir")),
        "reasons": reasons,
        "rerun_of": _text(rerun.get("run_id")) or _text(linked),
        "rerun_reason": _text(rerun.get("reason")) or _text(row.get("link_reason")),
        "reruns": [],
        "git": git_line(provenance) if provenance is not None else None,
        "git_dirty": provenance["dirty"] if provenance is not None else None,
        "post_steps": [
            {"name": inert(p.get("name")), "verdict": _text(p.get("verdict")),
             "exit_code": _int(p.get("exit_code"))}
            for p in _list(run.get("post_steps")) if isinstance(p, dict)
        ],
        "lock_wait_s": _number(lock.get("wait_s")),
        "lock_hold_s": _seconds(lock.get("acquired"), lock.get("released")),
        "duration_s": _seconds(times.get("started"), times.get("ended")),
        "started": _text(times.get("started")),
        "metrics": {name: _number(metrics.get(name)) for name in METRICS},
    }


def build_summary(
    night: Mapping[str, Any], records: Sequence[Mapping[str, Any]], trends: Trends | None = None
) -> dict:
    """The JSON form of the summary; `render_markdown` and `render_html` draw from it."""
    links = {r["row"]["id"]: r["row"].get("run_id") for r in records
             if isinstance(r.get("row"), dict) and _int(r["row"].get("id")) is not None}
    runs = [run_entry(r, links) for r in records]
    for entry in runs:  # the other direction of the rerun link
        if entry["rerun_of"]:
            for other in runs:
                if other["run_id"] == entry["rerun_of"] and entry["run_id"]:
                    other["reruns"].append(entry["run_id"])
    counts: dict[str, int] = {}
    for entry in runs:
        counts[entry["status"]] = counts.get(entry["status"], 0) + 1
    return {
        "schema": SCHEMA,
        "night": {inert(k, 200): _text(v) for k, v in night.items()},
        "counts": dict(sorted(counts.items())),
        "runs": runs,
        "trends": {
            control: [[name, {k: _number(v) for k, v in values.items()}] for name, values in pts]
            for control, pts in sorted((trends or {}).items())
        },
    }


def _seconds_text(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 120:
        return f"{value:.1f} s"
    minutes, seconds = divmod(round(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def _metric_text(entry: dict, name: str) -> str:
    return fmt(entry["metrics"].get(name), UNITS.get(name, ""))


def _link_text(entry: dict) -> str:
    parts = []
    if entry["rerun_of"]:
        reason = f" ({entry['rerun_reason']})" if entry["rerun_reason"] else ""
        parts.append(f"rerun of {entry['rerun_of']}{reason}")
    if entry["reruns"]:
        parts.append("rerun as " + ", ".join(entry["reruns"]))
    return "; ".join(parts)


_MD_SPECIAL = "\\`*_[]<>#!|~&"
_MD_ESCAPE = {ord(ch): "\\" + ch for ch in _MD_SPECIAL}


def _md(text: Any) -> str:
    """Inert Markdown text: controls escaped (no line breaks), and every character that can
    start markup (emphasis, links, images, HTML, entities, code, table pipes) backslash-
    escaped, as CommonMark allows for any ASCII punctuation. Never used inside a code span,
    where backslashes do not escape."""
    return inert(text, UNCAPPED).translate(_MD_ESCAPE)


def render_markdown(summary: Mapping[str, Any]) -> str:
    night = summary["night"]
    lines = [f"# Night {_md(night.get('name', '?'))}", ""]
    for key in ("campaign", "campaign_file", "seal", "created", "deadline", "dir"):
        if night.get(key):
            lines.append(f"- {key.replace('_', ' ')}: {_md(night[key])}")
    counts = ", ".join(f"{n} {_md(s)}" for s, n in summary["counts"].items()) or "no runs"
    lines += [f"- runs: {counts}", ""]
    head = ["#", "control", "attempt", "status", "reasons", "lock wait", "lock hold", "duration"]
    head += [LABELS[m] for m in SHOWN_METRICS]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in summary["runs"]:
        reasons = "; ".join(e["reasons"]) or ""
        link = _link_text(e)
        cells = [_md(c) for c in (
            e["plan_index"] if e["plan_index"] is not None else "", e["control"],
            e["attempt"] or "", e["status"], reasons + (f" ({link})" if link else ""),
            _seconds_text(e["lock_wait_s"]), _seconds_text(e["lock_hold_s"]),
            _seconds_text(e["duration_s"]), *(_metric_text(e, m) for m in SHOWN_METRICS),
        )]
        cells[3] = f"**{cells[3]}**"  # the only markup in a row, around escaped text
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for e in summary["runs"]:
        if e["run_id"]:
            git = f" (git {_md(e['git'])})" if e.get("git") else ""
            lines.append(f"- {_md(e['run_id'])}: {_md(e['run_dir'] or '')}{git}")
    if summary["trends"]:
        lines += ["", "## Across nights", ""]
        for control, points in summary["trends"].items():
            lines.append(f"### {_md(control)}")
            lines.append("")
            lines.append("| night | " + " | ".join(LABELS[m] for m in SHOWN_METRICS) + " |")
            lines.append("|---|" + "---|" * len(SHOWN_METRICS))
            for name, values in points:
                cells = [fmt(values.get(m), UNITS[m]) for m in SHOWN_METRICS]
                lines.append(f"| {_md(name)} | " + " | ".join(_md(c) for c in cells) + " |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;background:#fafafa}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}h3{font-size:1rem}
table{border-collapse:collapse;background:#fff;font-size:.85rem}
th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
.status{font-weight:600;padding:.1rem .4rem;border-radius:.3rem;white-space:nowrap}
.accepted{background:#d7f5dd;color:#135d22}.refused{background:#fde0e0;color:#8a1111}
.failed,.timed-out{background:#fde9d7;color:#8a4b11}
.interrupted,.deferred,.planned,.running,.unknown{background:#eee;color:#444}
.meta{color:#555;font-size:.85rem}.plots{display:flex;flex-wrap:wrap;gap:.5rem}
code{font-size:.8rem}
"""


def _h(text: Any) -> str:
    return html.escape(inert(text, UNCAPPED), quote=True)


def render_html(summary: Mapping[str, Any]) -> str:
    """A single self-contained page: inline CSS and SVG, no scripts, no external assets."""
    night = summary["night"]
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Night {_h(night.get('name', '?'))}</title>", f"<style>{_CSS}</style>",
        "</head><body>", f"<h1>Night {_h(night.get('name', '?'))}</h1>", '<ul class="meta">',
    ]
    for key in ("campaign", "campaign_file", "seal", "created", "deadline", "dir"):
        if night.get(key):
            out.append(f"<li>{_h(key.replace('_', ' '))}: <code>{_h(night[key])}</code></li>")
    counts = ", ".join(f"{n} {s}" for s, n in summary["counts"].items()) or "no runs"
    out += [f"<li>runs: {_h(counts)}</li>", "</ul>", "<table><thead><tr>"]
    head = ["#", "control", "attempt", "status", "reasons", "lock wait", "lock hold", "duration"]
    out.append("".join(f"<th>{_h(c)}</th>" for c in head + [LABELS[m] for m in SHOWN_METRICS]))
    out.append("</tr></thead><tbody>")
    for e in summary["runs"]:
        status = str(e["status"])
        css = status if status.replace("-", "").isalpha() else "unknown"
        reasons = "".join(f"<div>{_h(r)}</div>" for r in e["reasons"])
        link = _link_text(e)
        if link:
            reasons += f"<div class=\"meta\">{_h(link)}</div>"
        if e["run_id"]:
            reasons += f"<div class=\"meta\"><code>{_h(e['run_id'])}</code></div>"
        if e.get("git"):
            reasons += f"<div class=\"meta\">git {_h(e['git'])}</div>"
        cells = [
            f"<td class=\"num\">{_h(e['plan_index'] if e['plan_index'] is not None else '')}</td>",
            f"<td>{_h(e['control'])}</td>", f"<td class=\"num\">{_h(e['attempt'] or '')}</td>",
            f"<td><span class=\"status {_h(css)}\">{_h(status)}</span></td>",
            f"<td>{reasons}</td>",
            *(f"<td class=\"num\">{_h(_seconds_text(e[k]))}</td>"
              for k in ("lock_wait_s", "lock_hold_s", "duration_s")),
            *(f"<td class=\"num\">{_h(_metric_text(e, m))}</td>" for m in SHOWN_METRICS),
        ]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    if summary["trends"]:
        out.append("<h2>Across nights</h2>")
        for control, points in summary["trends"].items():
            out.append(f"<h3>{_h(control)}</h3><div class=\"plots\">")
            for metric in SHOWN_METRICS:
                series = [(name, values.get(metric)) for name, values in points]
                out.append(line_plot(series, title=LABELS[metric], unit=UNITS[metric]))
            out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def trend_points(
    nights: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
) -> dict[str, list[tuple[str, dict]]]:
    """Per control, its metrics in every night, oldest first; {} where it has none that night.

    Within a night the newest attempt that has metrics speaks for the control.
    """
    per_night: list[tuple[str, dict[str, dict]]] = []
    controls: set[str] = set()
    for name, records in nights:
        best: dict[str, tuple[int, dict]] = {}
        for record in records:
            entry = run_entry(record)
            if not any(v is not None for v in entry["metrics"].values()):
                continue
            attempt = entry["attempt"] or 0
            if entry["control"] not in best or attempt >= best[entry["control"]][0]:
                best[entry["control"]] = (attempt, entry["metrics"])
        per_night.append((name, {c: m for c, (_, m) in best.items()}))
        controls |= set(best)
    return {c: [(name, found.get(c, {})) for name, found in per_night] for c in sorted(controls)}

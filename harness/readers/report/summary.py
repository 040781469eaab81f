"""The morning summary of a night: one entry per run, as JSON, Markdown and CSV (the HTML
page is harness.readers.report.page).

Pure. Evidence files are read as untrusted input: a missing or odd field shows as "—",
never a crash, and every string is escaped for the format it lands in."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.base.plural import counted
from harness.base.reason import Reason
from harness.base.shapes import dict_or_empty
from harness.base.states import State, Status
from harness.config.references import TELEMETRY_FIGURES, range_text
from harness.judge.kernellog import EXCERPT
from harness.measure import perflog
from harness.measure.metrics import METRICS
from harness.measure.runfolder.layout import RECORD
from harness.measure.runfolder.runjson import provenance_of
from harness.readers.report.format import figure_text
from harness.readers.report.gitline import git_line
from harness.readers.report.headline import attempts_text, headline, tally
from harness.readers.report.inert import inert
from harness.readers.report.regressions import baseline_notes, regression_lines, regression_lists
from harness.readers.report.runplots import valid
from harness.readers.report.steps import commands, gate0_values, runs_dir_of
from harness.readers.report.unrun import not_executed, not_executed_lines
from harness.readers.report.verdict import SEP, call_state, verdict

SCHEMA = "harness.summary/v1"
MAX_RUN_PLOTS = 48  # a run's plot is ~0.15 s to draw and ~35 KB: a night of hundreds is not
UNCAPPED = 10**9  # the renderers only escape; the length was capped when the entry was built
MAX_INT = 10**18  # larger "metrics" are not figures: float() of them could overflow
# Night-level trend: per control, a list of (night name, {figure: value, "status": text}).
Trends = Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]]
# vLLM's figures a night shows (a column only where some run of the night has a value)
SHOWN_METRICS = (
    "kv_cache_gib", "kv_tokens", "model_load_gib", "model_load_s",
    "graph_capture_gib", "graph_capture_s", "engine_init_s",
)
LABELS = {
    "duration_s": "duration", "lock_wait_s": "lock wait", "lock_hold_s": "lock hold",
    "exit_code": "exit code",
    "kv_cache_gib": "KV cache", "kv_tokens": "KV tokens", "max_concurrency": "max concurrency",
    "max_model_len": "max model len", "model_load_gib": "model load",
    "model_load_s": "model load time", "graph_capture_gib": "graph capture",
    "graph_capture_s": "graph capture time", "engine_init_s": "engine init",
    "compilation_s": "compilation",
    "memory_peak_bytes": "peak memory", "cpu_pct_mean": "mean CPU", "energy_j": "energy",
    "energy_per_token_j": "energy per token", "generated_tokens": "generated tokens",
}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) \
        and abs(value) <= MAX_INT else None


def _text(value: Any) -> str | None:
    """A string field as inert text; None when absent. A non-string is shown as its JSON,
    visible rather than silently dropped."""
    if value is None or value == "":
        return None
    return inert(value)


def trend_entry(record: Mapping[str, Any]) -> dict:
    """What names a run in a trend and in the night's table (control, attempt, status, run
    id), normalised as in `run_entry`: the history of a year of nights reads thousands of
    runs through it, so it reads no figure (`trend_points` reads those of the attempt kept)."""
    row, run = dict_or_empty(record.get("row")), dict_or_empty(record.get("run"))
    status = run.get("status")
    return {
        "control": _text(row.get("control"))
        or _text(dict_or_empty(run.get("control")).get("name")) or "?",
        "attempt": _int(row.get("attempt")),
        "status": (_text(status) if isinstance(status, str) else None)
        or _text(row.get("state")) or "unknown",
        "run_id": _text(run.get("run_id")) or _text(row.get("run_id")),
    }


def _found(record: Mapping[str, Any]) -> dict:
    """The run's figures (harness.measure.perflog.figures, the one definition), its exit
    code an integer or None."""
    found = perflog.figures(dict_or_empty(record.get("run")),
                            dict_or_empty(record.get("metrics")))
    return {**found, "exit_code": _int(found["exit_code"])}


def run_entry(record: Mapping[str, Any], links: Mapping[int, str] | None = None) -> dict:
    """One summary row from {"row": journal row, "run": run.json, "metrics": metrics.json}.

    Every field is normalised to its type (inert text, a finite number, or None), so a
    hostile run.json can change what a row says but not whether the report renders."""
    row, run = dict_or_empty(record.get("row")), dict_or_empty(record.get("run"))
    times = dict_or_empty(run.get("times"))
    raw_reasons = run.get("reasons")
    reasons = [inert(Reason.of(r).text()) for r in _list(raw_reasons) if r]
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
    rerun = dict_or_empty(run.get("rerun_of"))
    link = row.get("rerun_of")
    linked = (links or {}).get(link) if isinstance(link, int) else None
    provenance = provenance_of(run.get("provenance"))
    found = _found(record)
    return {
        **trend_entry(record),
        **{name: found[name] for name in TIME_FIGURES},
        "metrics": {name: found[name] for name in METRICS},
        "telemetry": {name: found[name] for name in TELEMETRY_FIGURES},
        "findings": _findings(record.get("reference")),  # the reference step's
        "path": _text(record.get("path")),
        "sealed": _text(times.get("sealed")),
        "campaign": _text(dict_or_empty(run.get("campaign")).get("name")),
        "plan_index": _int(row.get("plan_index")),
        "origin": _text(row.get("origin")),
        "state": _text(row.get("state")),
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
        "started": _text(times.get("started")),
        "series": valid(record.get("telemetry")),
        "kernel": kernel_faults(record.get("kernel")),
        "gate0": gate0_values(record.get("gate0")),
        "call": call_state(record.get("regression")),  # what its regression call rests on
        "number": None, "superseded_by": None, "next": [],  # set by build_summary
    }


def kernel_faults(found: Any) -> list[dict]:
    """The kernel log's faults as `harness.readers.report.nights.kernel_excerpt` gave them,
    read back like any input (summary.json is rendered again by `report`)."""
    return [{"rule": inert(f.get("rule"), 64), "count": _int(f.get("count")),
             "lines": [inert(x, 300) for x in _list(f.get("lines"))[:EXCERPT]]}
            for f in _list(found) if isinstance(f, dict)]


def _findings(verdict: Any) -> dict[str, dict]:
    """The reference step's findings, each reduced to numbers and a flag."""
    return {inert(name, 64): {
        "lower": perflog.number(f.get("lower")), "upper": perflog.number(f.get("upper")),
        "outside": f["outside"] if isinstance(f.get("outside"), bool) else None,
        "refuse": f.get("refuse") is True,
    } for name, f in perflog.findings_of(verdict).items()}


def _slot_order(runs: list[dict]) -> list[dict]:
    """Attempts of one slot together, oldest first (a rerun's row, journalled last, reads
    best under the attempt it supersedes); rows without a slot after."""
    keyed = sorted(enumerate(runs), key=lambda p: (
        p[1]["plan_index"] is None, p[1]["plan_index"] or 0,
        p[1]["attempt"] or 0 if p[1]["plan_index"] is not None else 0, p[0]))
    return [e for _, e in keyed]


def _accepted_before(control: str, night: str | None, trends: Trends) -> str | None:
    """The run id of the newest accepted run of `control` in an earlier night."""
    for name, values in reversed(list(trends.get(control, ()))):
        if name != night and values.get("status") == Status.ACCEPTED and values.get("run_id"):
            return str(values["run_id"])
    return None


def _next_steps(runs: list[dict], night: Mapping[str, Any], trends: Trends) -> None:
    """Each row that did not end accepted gets its commands: rerun it, diff it against
    the attempt that superseded it, an accepted attempt of its slot, or the newest accepted
    run of its control in an earlier night."""
    paths = {e["run_id"]: e["path"] or e["run_dir"] for e in runs if e["run_id"]}
    runs_dir = runs_dir_of(night.get("dir"))
    for e in runs:
        if e["status"] == Status.ACCEPTED:
            continue
        other = paths.get(e["superseded_by"] or "")
        if other is None:
            mates = [o for o in runs if o["number"] == e["number"] and o is not e
                     and o["status"] == Status.ACCEPTED and o["run_id"] in paths]
            other = paths[mates[-1]["run_id"]] if mates else None
        if other is None and (earlier := _accepted_before(e["control"], night.get("name"),
                                                          trends)):
            other = os.path.join(runs_dir, earlier) if runs_dir else earlier
        e["next"] = commands(e, other)


def build_summary(
    night: Mapping[str, Any], records: Sequence[Mapping[str, Any]], trends: Trends | None = None,
    links: Mapping[str, str] | None = None,
) -> dict:
    """The JSON form of the summary; `render_markdown` and `render_html` draw from it.
    `trends` as `trend_points` gives them: already normalised, not checked again."""
    row_links = {r["row"]["id"]: r["row"].get("run_id") for r in records
                 if isinstance(r.get("row"), dict) and _int(r["row"].get("id")) is not None}
    runs = _slot_order([run_entry(r, row_links) for r in records])
    for entry in runs:  # the other direction of the rerun link
        if entry["rerun_of"]:
            for other in runs:
                if other["run_id"] == entry["rerun_of"] and entry["run_id"]:
                    other["reruns"].append(entry["run_id"])
    for i, entry in enumerate(runs):
        entry["number"] = entry["plan_index"] + 1 if entry["plan_index"] is not None else i + 1
    tallied = tally(runs, links)
    for i, by in tallied["superseded"].items():
        runs[i]["superseded_by"] = by
    plotted = [e for e in runs if e["series"] and not e["superseded_by"]]
    for e in runs:  # series only where the page plots them: summary.json stays small
        if e["series"] and (e["superseded_by"] or e not in plotted[:MAX_RUN_PLOTS]):
            e["series"] = {}
    facts = {inert(k, 200): _text(v) for k, v in night.items()}
    shown_trends = {control: [[name, values] for name, values in pts]
                    for control, pts in sorted((trends or {}).items())}
    _next_steps(runs, facts, shown_trends)
    regressions, unconfirmed = regression_lists(records)
    said = verdict(runs, regressions, unconfirmed)
    return {
        "schema": SCHEMA,
        "night": facts,
        "headline": headline(tallied) + (SEP + said["line"] if said["line"] else ""),
        "verdict": said,  # the headline's regression part, counted
        "attempts": attempts_text(tallied),
        "controls": {k: tallied[k] for k in ("controls", "final", "after")},
        "counts": dict(sorted(Counter(e["status"] for e in runs).items())),
        "runs": runs,
        "trends": shown_trends,
        "regressions": regressions,  # confirmed by their rerun: the only ones that alert
        "unconfirmed": unconfirmed,  # one-offs: called, not confirmed
        "baselines": baseline_notes(records),  # calls whose baseline skipped junk or a cap
        "plots_left_out": max(0, len(plotted) - MAX_RUN_PLOTS),  # sampled runs not plotted
        "not_executed": not_executed(records),  # slots a stopped walk left unrun, and why
    }


def shown_metrics(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """vLLM's figures with a value in some run of the night: no column is always empty."""
    return [m for m in SHOWN_METRICS if any(e["metrics"].get(m) is not None for e in runs)]


def shown_telemetry(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The telemetry figures with a value in some run of the night."""
    return [m for m in TELEMETRY_FIGURES
            if any(e.get("telemetry", {}).get(m) is not None for e in runs)]


def csv_rows(summary: Mapping[str, Any]) -> list[dict]:
    """The night's perf-log lines (harness.measure.perflog's columns), for `--format csv`."""
    out = []
    for e in summary["runs"]:
        figures = {k: e[k] for k in ("duration_s", "lock_wait_s", "lock_hold_s", "exit_code")}
        out += perflog.rows({**e, "figures": {**figures, **e["metrics"]}})
    return out


def link_text(entry: dict) -> str:
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
    """Inert Markdown text: controls escaped (no line breaks), and every character that can start
    markup (emphasis, links, images, HTML, entities, code, table pipes) backslash-escaped, as
    CommonMark allows for any ASCII punctuation. Never used inside a code span, where
    backslashes do not escape."""
    return inert(text, UNCAPPED).translate(_MD_ESCAPE)


def reference_note(entry: Mapping[str, Any], name: str) -> str | None:
    """`outside, expected [2.4, 4]`, `within [2.4, 4]`, `no value, expected ≤ 600`,
    or None when the control names no reference for this figure."""
    f = entry["findings"].get(name)
    if f is None:
        return None
    expected = range_text(f["lower"], f["upper"]) if (f["lower"], f["upper"]) != (None, None) \
        else "?"
    state = {None: "no value, expected", True: "outside, expected", False: "within"}[
        f["outside"]]
    return f"{state} {expected}" + (" (refuses)" if f["refuse"] and f["outside"] is not False
                                    else "")


def figure_value(entry: Mapping[str, Any], name: str) -> Any:
    """A row's figure by name: vLLM's from its metrics, telemetry's from its telemetry, the
    times from the row."""
    if name in METRICS:
        return entry["metrics"].get(name)
    if name in TELEMETRY_FIGURES:
        return (entry.get("telemetry") or {}).get(name)
    return entry.get(name)


def figure_cell(entry: Mapping[str, Any], name: str) -> str:
    value = figure_value(entry, name)
    note = reference_note(entry, name)
    text = figure_text(name, value)
    return f"{text} ⚠ {note}" if note and not note.startswith("within") else text


TIME_FIGURES = ("lock_wait_s", "lock_hold_s", "duration_s", "exit_code")


NIGHT_FACTS = ("campaign", "campaign_file", "seal", "created", "deadline", "dir")


def night_facts(night: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) of each fact of the night it recorded, for every rendering's header."""
    return [(key.replace("_", " "), night[key]) for key in NIGHT_FACTS if night.get(key)]


def counts_text(summary: Mapping[str, Any]) -> str:
    """What the attempts ended in (`3 accepted, 1 refused (1 superseded)`)."""
    return summary.get("attempts") or ", ".join(
        f"{n} {s}" for s, n in summary["counts"].items()) or "no runs"


def row_notes(e: Mapping[str, Any]) -> list[str]:
    """The row's reasons, its rerun links and its Gate-0 values, as inert lines."""
    from harness.readers.report.steps import gate0_lines

    notes = list(e["reasons"])
    if link := link_text(e):
        notes.append(link)
    notes += [f"Gate 0 {line}" for line in gate0_lines(e.get("gate0") or [])]
    return notes


def status_text(e: Mapping[str, Any]) -> str:
    """`refused`, or `refused, superseded by <run id>` for an attempt a later one replaced."""
    by = e.get("superseded_by")
    return f"{e['status']}, superseded by {by}" if by else str(e["status"])


def render_markdown(summary: Mapping[str, Any]) -> str:
    night = summary["night"]
    lines = [f"# Night {_md(night.get('name', '?'))}", ""]
    if summary.get("headline"):
        lines += [f"**{_md(summary['headline'])}**", ""]
    lines += [f"- {label}: {_md(value)}" for label, value in night_facts(night)]
    lines += [f"- attempts: {_md(counts_text(summary))}", ""]
    for title, said in (("Regressions", regression_lines(summary)),
                        ("Not executed", not_executed_lines(summary))):
        if said:
            lines += [f"## {title}", "", *(f"- {_md(line)}" for line in said), ""]
    shown = [*shown_metrics(summary["runs"]), *shown_telemetry(summary["runs"])]
    head = ["#", "control", "attempt", "status", "reasons"]
    head += [LABELS[m] for m in (*TIME_FIGURES, *shown)]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in summary["runs"]:
        cells = [_md(c) for c in (
            e["number"] if e.get("number") is not None else "", e["control"],
            e["attempt"] or "", status_text(e), "; ".join(row_notes(e)),
            *(figure_cell(e, m) for m in (*TIME_FIGURES, *shown)),
        )]
        if not e.get("superseded_by"):  # bold: the attempts that speak for their control
            cells[3] = f"**{cells[3]}**"  # the only markup in a row, around escaped text
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += _kernel_markdown(summary["runs"])
    lines += _next_markdown(summary["runs"])
    for e in summary["runs"]:
        if e["run_id"]:
            git = f" (git {_md(e['git'])})" if e.get("git") else ""
            lines.append(f"- {_md(e['run_id'])}: {_md(e['path'] or e['run_dir'] or '')}{git}")
    if summary["trends"]:
        lines += ["", "## Across nights", "", *_trend_tables(summary["trends"])]
    return "\n".join(lines).rstrip() + "\n"


_MARKUP = set("`<>[]&")


def _md_command(cmd: str) -> str:
    """A command line as an indented code block line (copied as it is); one whose text
    holds markup characters (a hostile path) as escaped text instead, never raw."""
    return f"    {cmd}" if not _MARKUP & set(cmd) else f"- {_md(cmd)}"


def kernel_heading(e: Mapping[str, Any], fault: Mapping[str, Any]) -> str:
    """`Row 2, kv-auto attempt 1: KERNEL-LOG-GPU-RESET, 3 lines`."""
    return (f"Row {e.get('number')}, {e['control']} attempt {e['attempt'] or '?'}: "
            f"{fault['rule']}, {counted(fault['count'] or 0, 'line')}")


def _kernel_markdown(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """`## Kernel log`: each fault a run's window showed, with its first lines."""
    out: list[str] = []
    for e in runs:
        for fault in e.get("kernel") or []:
            out += [_md(kernel_heading(e, fault)), "",
                    *(_md_command(line) for line in fault["lines"]), ""]
    return ["## Kernel log", "", *out] if out else []


def _next_markdown(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """`## Next steps`: per row that did not end accepted, its commands as an indented code
    block (literal to every renderer; each command is one inert line, so none can end it)."""
    out: list[str] = []
    for e in runs:
        if not e.get("next"):
            continue
        out += [f"Row {_md(e.get('number'))}, {_md(e['control'])} attempt "
                f"{_md(e['attempt'] or '?')}, {_md(status_text(e))}:", "",
                *(_md_command(cmd) for cmd in e["next"]), ""]
    return ["## Next steps", "", *out] if out else []


def _trend_tables(trends: Mapping[str, Any]) -> list[str]:
    names = ["duration_s", "lock_wait_s", "exit_code"]
    names += [m for m in (*SHOWN_METRICS, *TELEMETRY_FIGURES)
              if any(v.get(m) is not None for pts in trends.values() for _, v in pts)]
    lines = []
    for control, points in trends.items():
        lines += [f"### {_md(control)}", "",
                  "| night | status | " + " | ".join(LABELS[m] for m in names) + " |",
                  "|---|---|" + "---|" * len(names)]
        for name, values in points:
            cells = [values.get("status") or "—"]
            cells += [figure_text(m, values.get(m)) for m in names]
            lines.append(f"| {_md(name)} | " + " | ".join(_md(c) for c in cells) + " |")
        lines.append("")
    return lines


def trend_points(
    nights: Iterable[tuple[str, Iterable[Mapping[str, Any]]]],
) -> dict[str, list[tuple[str, dict]]]:
    """Per control, its figures and status in every night, oldest first, each value already
    normalised (inert text, a finite number or None), each night's folder name too (any name
    the command line gives); the newest attempt speaks for the control. `nights` is read
    once: a generator lets each night go once reduced."""
    per_night: list[tuple[str, dict[str, dict]]] = []
    controls: set[str] = set()
    for name, records in nights:
        best: dict[str, tuple[int, Mapping[str, Any], dict]] = {}
        for record in records:
            entry = trend_entry(record)
            if entry["status"] in (State.PLANNED, State.RUNNING) and not entry["run_id"]:
                continue  # never started: nothing to plot
            attempt = entry["attempt"] or 0
            if entry["control"] not in best or attempt >= best[entry["control"]][0]:
                best[entry["control"]] = (attempt, record, entry)
        per_night.append((inert(name), {c: {**_found(record), "status": entry["status"],
                                            "run_id": entry["run_id"]}
                                        for c, (_, record, entry) in best.items()}))
        controls |= set(best)
    return {c: [(name, found.get(c, {})) for name, found in per_night] for c in sorted(controls)}
